/* view.h - what the TUI knows of the daemon, and the arithmetic of its
 * pictures, with no curses and no network in it: the last snapshot, the
 * evaluation series, the change markers, the log of events; histogram
 * bars in eighths of a cell, sparkline levels, the labels of changes and
 * delays, the +/- delay ladder. */
#ifndef SL_TUI_VIEW_H
#define SL_TUI_VIEW_H

#include <jansson.h>
#include <stddef.h>

#define TUI_LOG_N 64     /* log lines kept */
#define TUI_LOG_W 200    /* bytes per log line */
#define TUI_SERIES_MAX 4096
#define TUI_MARKS_MAX 64

typedef struct tui_model {
	json_t *snap;        /* the last snapshot (NULL: none yet) */
	int run;             /* its run id (-1: none) */
	/* the evaluation series of this run: version, test accuracy, train loss */
	double sv[TUI_SERIES_MAX], sacc[TUI_SERIES_MAX], sloss[TUI_SERIES_MAX];
	int ns;
	double marks[TUI_MARKS_MAX]; /* versions of the changes seen */
	double marks_t[TUI_MARKS_MAX]; /* ... and their times (each once) */
	int nmarks;
	char log[TUI_LOG_N][TUI_LOG_W]; /* a ring, newest at (logpos-1) */
	int logpos, nlog;
	json_t *schema;      /* GET /api/v1/schema's answer, or NULL (borrowed) */
} tui_model;

void tui_model_init(tui_model *m);
void tui_model_free(tui_model *m);

/* A published message, "TOPIC JSON": updates m. Returns 1 for a snapshot,
 * 2 when the run changed (a new run id, or the daemon restarted: the
 * caller fetches the series again), 0 for another event, -1 for text that
 * is not "TOPIC JSON". */
int tui_model_message(tui_model *m, const char *msg);
/* Add an evaluation record (test_acc, train_loss, v) to the series: in
 * version order, a repeated or older v is ignored. */
void tui_model_eval(tui_model *m, json_t *e);
/* The run's changes so far (GET /api/v1/runs/{id}/changes' "changes"),
 * for a TUI that connected after them: each one not seen yet is logged
 * and marked, as if it had come on the bus. */
void tui_model_changes(tui_model *m, json_t *changes);
/* Forget the series and marks (a new run). */
void tui_model_reset(tui_model *m, int run);
void tui_model_log(tui_model *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The i-th newest log line (0: the newest), or NULL. */
const char *tui_model_log_line(const tui_model *m, int i);

/* "exp 10 ms", "const 60 ms at server" (with_where), "version s=3",
 * "none". */
void tui_delay_text(json_t *delay, int with_where, char *out, size_t cap);
/* A change record as a line: "w2 delay const 500 ms", "rule ssp (s=2)",
 * "params n=4", "lr 0.02, momentum 0.9". With a new rule, the parameters
 * it reads that differ from their defaults; with parameters alone, those
 * that rule (the run's) reads; as schema (may be NULL: then all) lists
 * them. */
void tui_change_label(json_t *change, json_t *schema, const char *rule, char *out, size_t cap);

/* The next mean delay up (dir > 0) or down from ms on the ladder 1, 2, 5,
 * 10, 20, 50, ... ms; 0 below 1 ms. */
double tui_delay_step(double ms, int dir);
/* bytes in at most 5 characters: "512", "827K", "1.2M", "3.4G" (powers of
 * 1000); "-" for a value that is not a count */
void tui_bytes_text(double bytes, char *out, size_t cap);

/* Histogram bars: n bucket counts into width columns (a column sums
 * ceil(n/width) buckets; returned as *per), each a height in eighths of a
 * cell, 0..rows*8, scaled to the tallest. A column with a count > 0 is at
 * least one eighth. Returns the columns used. */
int tui_bars(const double *counts, int n, int width, int rows, int *eighths, int *per);
/* A value's sparkline level, 1..8, between lo and hi (4 when hi <= lo:
 * a flat line in the middle; 1 for NaN). */
int tui_spark_level(double v, double lo, double hi);

#endif
