/* view.c - the TUI's state and the arithmetic of its pictures (view.h). */
#include "view.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
tui_model_init(tui_model *m)
{
	memset(m, 0, sizeof(*m));
	m->run = -1;
}

void
tui_model_free(tui_model *m)
{
	json_decref(m->snap);
	m->snap = NULL;
}

void
tui_model_reset(tui_model *m, int run)
{
	m->run = run;
	m->ns = 0;
	m->nmarks = 0;
}

void
tui_model_log(tui_model *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->log[m->logpos], TUI_LOG_W, fmt, ap);
	va_end(ap);
	m->logpos = (m->logpos + 1) % TUI_LOG_N;
	if (m->nlog < TUI_LOG_N)
		m->nlog++;
}

const char *
tui_model_log_line(const tui_model *m, int i)
{
	if (i < 0 || i >= m->nlog)
		return NULL;
	return m->log[(m->logpos - 1 - i + 2 * TUI_LOG_N) % TUI_LOG_N];
}

void
tui_model_eval(tui_model *m, json_t *e)
{
	json_t *v = json_object_get(e, "v");
	if (!json_is_number(v))
		return;
	double ver = json_number_value(v);
	if (m->ns && ver <= m->sv[m->ns - 1])
		return;
	if (m->ns == TUI_SERIES_MAX) { /* keep the newer half */
		int h = TUI_SERIES_MAX / 2;
		memmove(m->sv, m->sv + h, h * sizeof(double));
		memmove(m->sacc, m->sacc + h, h * sizeof(double));
		memmove(m->sloss, m->sloss + h, h * sizeof(double));
		m->ns = h;
	}
	json_t *acc = json_object_get(e, "test_acc"), *loss = json_object_get(e, "train_loss");
	m->sv[m->ns] = ver;
	m->sacc[m->ns] = json_is_number(acc) ? json_number_value(acc) : NAN;
	m->sloss[m->ns] = json_is_number(loss) ? json_number_value(loss) : NAN;
	m->ns++;
}

/* a number as short as it reads: 0.02, 500, 1e-05 */
static void
num_text(json_t *v, char *out, size_t cap)
{
	if (json_is_integer(v))
		snprintf(out, cap, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(out, cap, "%g", json_real_value(v));
	else if (json_is_string(v))
		snprintf(out, cap, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(out, cap, "%s", json_is_true(v) ? "true" : "false");
	else {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		snprintf(out, cap, "%s", s ? s : "?");
		free(s);
	}
}

void
tui_delay_text(json_t *d, int with_where, char *out, size_t cap)
{
	const char *dist = json_string_value(json_object_get(d, "dist"));
	json_t *mean = json_object_get(d, "mean_ms");
	const char *where = json_string_value(json_object_get(d, "where"));
	size_t n = 0;
	out[0] = 0;
	if (!json_is_object(d) || (dist && !strcmp(dist, "none"))) {
		snprintf(out, cap, "none");
		return;
	}
	if (dist && !strcmp(dist, "version"))
		n = snprintf(out, cap, "version s=%lld",
			     (long long)json_integer_value(json_object_get(d, "s")));
	else {
		if (dist)
			n = snprintf(out, cap, "%s", dist);
		if (json_is_number(mean) && n < cap) {
			double ms = json_number_value(mean);
			n += snprintf(out + n, cap - n, "%s%.*f ms", n ? " " : "", ms < 10 && ms != floor(ms) ? 1 : 0, ms);
		}
	}
	if (with_where && where && n < cap)
		n += snprintf(out + n, cap - n, "%sat %s", n ? " " : "", where);
	if (!n)
		num_text(d, out, cap);
}

/* "s=2, lambda=0.1": the values in rp of the parameters rule reads (as
 * the schema lists them; every key of rp when the schema does not know
 * rule), leaving out those at their default when skip_defaults; returns
 * the bytes written */
static size_t
params_text(json_t *schema, const char *rule, json_t *rp, int skip_defaults, char *out, size_t cap)
{
	json_t *r, *p, *keys = NULL;
	size_t i, n = 0;
	json_array_foreach(json_object_get(schema, "rules"), i, r)
		if (rule && json_is_string(json_object_get(r, "name")) &&
		    !strcmp(json_string_value(json_object_get(r, "name")), rule))
			keys = json_object_get(r, "params");
	out[0] = 0;
	const char *key;
	json_t *v;
	json_object_foreach(rp, key, v) {
		json_t *def = NULL;
		int reads = !keys;
		json_array_foreach(keys, i, p) {
			const char *pk = json_string_value(json_object_get(p, "key"));
			if (pk && !strcmp(pk, key)) {
				reads = 1;
				def = json_object_get(p, "default");
			}
		}
		if (!reads || (skip_defaults && def && (json_equal(v, def) ||
		    (json_is_number(v) && json_number_value(v) == json_number_value(def)))))
			continue;
		char one[32];
		num_text(v, one, sizeof(one));
		if (n < cap)
			n += snprintf(out + n, cap - n, "%s%s=%s", n ? ", " : "", key, one);
	}
	return n < cap ? n : cap - 1;
}

void
tui_change_label(json_t *c, json_t *schema, const char *rule, char *out, size_t cap)
{
	json_t *set = json_object_get(c, "set"), *w = json_object_get(c, "worker");
	json_t *rp = json_object_get(set, "rule_params");
	size_t n = 0;
	out[0] = 0;
	if (json_is_integer(w))
		n = snprintf(out, cap, "w%lld ", (long long)json_integer_value(w));
	const char *k;
	json_t *v;
	char val[96];
	json_object_foreach(set, k, v) {
		if (n >= cap)
			break;
		if (!strcmp(k, "rule_params") && json_object_get(set, "rule"))
			continue;
		if (!strcmp(k, "delay"))
			tui_delay_text(v, 1, val, sizeof(val));
		else if (!strcmp(k, "rule_params"))
			params_text(schema, rule, v, 0, val, sizeof(val));
		else
			num_text(v, val, sizeof(val));
		n += snprintf(out + n, cap - n, "%s%s %s", n && out[n - 1] != ' ' ? ", " : "",
			      strcmp(k, "rule_params") ? k : "params", val);
		char ps[96];
		if (!strcmp(k, "rule") && n < cap && params_text(schema, json_string_value(v), rp, 1, ps, sizeof(ps)))
			n += snprintf(out + n, cap - n, " (%s)", ps);
	}
	if (!json_object_size(set) && n < cap) {
		const char *ev = json_string_value(json_object_get(c, "event"));
		snprintf(out + n, cap - n, "%s", ev ? ev : "change");
	}
}

/* an event as a log line */
static void
log_event(tui_model *m, const char *topic, json_t *o)
{
	char label[TUI_LOG_W - 40];
	json_t *v = json_object_get(o, "v");
	char at[32] = "";
	if (json_is_number(v))
		snprintf(at, sizeof(at), "v %.0f ", json_number_value(v));
	if (!strcmp(topic, "change")) {
		/* once each: the bus and the run's list (a late TUI) both bring it */
		double t = json_number_value(json_object_get(o, "t"));
		for (int k = 0; json_is_number(v) && k < m->nmarks; k++)
			if (m->marks[k] == json_number_value(v) && m->marks_t[k] == t)
				return;
		const char *origin = json_string_value(json_object_get(o, "origin"));
		tui_change_label(o, m->schema, json_string_value(json_object_get(m->snap, "rule")),
				 label, sizeof(label));
		tui_model_log(m, "%s%s%s%s", at, origin ? origin : "", origin ? ": " : "", label);
		if (json_is_number(v)) {
			if (m->nmarks == TUI_MARKS_MAX) {
				memmove(m->marks, m->marks + 1, (TUI_MARKS_MAX - 1) * sizeof(double));
				memmove(m->marks_t, m->marks_t + 1, (TUI_MARKS_MAX - 1) * sizeof(double));
				m->nmarks--;
			}
			m->marks_t[m->nmarks] = t;
			m->marks[m->nmarks++] = json_number_value(v);
		}
	} else if (!strcmp(topic, "run")) {
		json_t *w = json_object_get(o, "workers");
		const char *rule = json_string_value(json_object_get(o, "rule"));
		tui_model_log(m, "new run %lld: %s, %lld workers",
			      (long long)json_integer_value(json_object_get(o, "run")),
			      rule ? rule : "?", (long long)json_integer_value(w));
	} else if (!strcmp(topic, "end")) {
		const char *stop = json_string_value(json_object_get(o, "stop"));
		tui_model_log(m, "%srun finished (%s), test accuracy %.4f", at, stop ? stop : "?",
			      json_number_value(json_object_get(o, "test_acc")));
	} else if (!strcmp(topic, "caption")) {
		const char *cap = json_string_value(json_object_get(o, "caption"));
		tui_model_log(m, "scene %lld: %s", (long long)json_integer_value(json_object_get(o, "scene")) + 1,
			      cap ? cap : "");
	} else if (!strcmp(topic, "checkpoint")) {
		const char *p = json_string_value(json_object_get(o, "path"));
		tui_model_log(m, "%scheckpoint %s", at, p ? p : "?");
	} else if (!strcmp(topic, "diverged")) {
		const char *what = json_string_value(json_object_get(o, "what"));
		tui_model_log(m, "%sdiverged: worker %lld's %s is not finite (read v %lld); "
			      "l recovers with an lr",
			      at, (long long)json_integer_value(json_object_get(o, "worker")),
			      what ? what : "step",
			      (long long)json_integer_value(json_object_get(o, "v_read")));
	} else {
		char *s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
		tui_model_log(m, "%s %s", topic, s ? s : "");
		free(s);
	}
}

void
tui_model_changes(tui_model *m, json_t *changes)
{
	size_t i;
	json_t *c;
	json_array_foreach(changes, i, c)
		if (json_is_object(c))
			log_event(m, "change", c);
}

int
tui_model_message(tui_model *m, const char *msg)
{
	const char *sp = strchr(msg, ' ');
	char topic[32];
	if (!sp || sp == msg || (size_t)(sp - msg) >= sizeof(topic))
		return -1;
	memcpy(topic, msg, sp - msg);
	topic[sp - msg] = 0;
	json_t *o = json_loads(sp + 1, 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return -1;
	}
	int ret = 0;
	json_t *run = json_object_get(o, "run");
	int rid = json_is_integer(run) ? (int)json_integer_value(run) : -1;
	if (!strcmp(topic, "snapshot")) {
		double oldv = m->snap ? json_number_value(json_object_get(m->snap, "version")) : 0;
		double newv = json_number_value(json_object_get(o, "version"));
		ret = 1;
		if (!m->snap || rid != m->run || newv < oldv) {
			tui_model_reset(m, rid);
			ret = 2;
		}
		json_decref(m->snap);
		m->snap = o;
		return ret;
	}
	if (!strcmp(topic, "eval")) {
		if (rid < 0 || rid == m->run)
			tui_model_eval(m, o);
	} else if (rid < 0 || rid == m->run || strcmp(topic, "change"))
		log_event(m, topic, o);
	json_decref(o);
	return ret;
}

double
tui_delay_step(double ms, int dir)
{
	static const double ladder[] = {1, 2, 5};
	if (dir > 0) {
		for (double decade = 1;; decade *= 10)
			for (int i = 0; i < 3; i++)
				if (ladder[i] * decade > ms * (1 + 1e-9))
					return ladder[i] * decade;
	}
	double best = 0;
	for (double decade = 1; decade <= ms; decade *= 10)
		for (int i = 0; i < 3; i++)
			if (ladder[i] * decade < ms * (1 - 1e-9))
				best = ladder[i] * decade;
	return best;
}

int
tui_bars(const double *counts, int n, int width, int rows, int *eighths, int *per)
{
	if (width < 1 || n < 1 || rows < 1) {
		*per = 1;
		return 0;
	}
	int k = (n + width - 1) / width, cols = (n + k - 1) / k;
	double top = 0;
	for (int c = 0; c < cols; c++) {
		double s = 0;
		for (int i = c * k; i < n && i < (c + 1) * k; i++)
			s += counts[i];
		eighths[c] = 0;
		if (s > top)
			top = s;
	}
	for (int c = 0; c < cols && top > 0; c++) {
		double s = 0;
		for (int i = c * k; i < n && i < (c + 1) * k; i++)
			s += counts[i];
		int e = (int)lround(s / top * rows * 8);
		eighths[c] = s > 0 && e < 1 ? 1 : e;
	}
	*per = k;
	return cols;
}

int
tui_spark_level(double v, double lo, double hi)
{
	if (!isfinite(v))
		return 1;
	if (!(hi > lo))
		return 4; /* flat: the middle */
	int l = 1 + (int)lround((v - lo) / (hi - lo) * 7);
	return l < 1 ? 1 : l > 8 ? 8 : l;
}

void
tui_bytes_text(double bytes, char *out, size_t cap)
{
	static const char unit[] = " KMGT";
	if (!(bytes >= 0) || !isfinite(bytes)) {
		snprintf(out, cap, "-");
		return;
	}
	int u = 0;
	while (bytes >= 999.5 && u < 4) {
		bytes /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(out, cap, "%.0f", bytes);
	else
		snprintf(out, cap, bytes < 9.95 ? "%.1f%c" : "%.0f%c", bytes, unit[u]);
}
