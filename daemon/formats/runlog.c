/* runlog.c - JSON Lines writer. */
#include "runlog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "config_json.h"
#include "dataset.h"
#include "jsonout.h"
#include "sl.h"

int
runlog_open(runlog *l, const char *path, const char *format, int append,
	    char *err)
{
	memset(l, 0, sizeof(*l));
	if (format && strcmp(format, "jsonl") && strcmp(format, "csv"))
		return sl_fail(err, SL_EINVAL,
			       "--log-format: unknown \"%s\" (expected jsonl or csv)", format);
	l->csv = format && !strcmp(format, "csv");
	if (!path || !strcmp(path, "-")) {
		l->f = stdout;
		snprintf(l->path, sizeof(l->path), "<stdout>");
		return 0;
	}
	l->f = fopen(path, append ? "a" : "w");
	if (l->f && append && ftell(l->f) > 0)
		l->header_done = 1;
	if (!l->f)
		return sl_fail(err, SL_EIO, "--log: cannot open %s: %s", path,
			       strerror(errno));
	l->own = 1;
	snprintf(l->path, sizeof(l->path), "%s", path);
	return 0;
}

static const char *const csv_cols[] = {
	"kind", "run", "t", "v", "epoch", "samples", "train_loss", "test_loss",
	"test_acc", "best_acc", "samples_per_s", "staleness_mean",
	"staleness_p50", "staleness_p99", "staleness_max", "age_ms_mean", "detail",
};

/* one value as a CSV field: numbers bare, text quoted with "" doubled */
static void
csv_field(FILE *f, const json_t *v)
{
	char num[40];
	if (!v || json_is_null(v))
		return;
	if (json_is_integer(v)) {
		fprintf(f, "%lld", (long long)json_integer_value(v));
	} else if (json_is_real(v)) {
		jsonout_number(num, json_real_value(v));
		fputs(num, f);
	} else {
		char *txt = json_is_string(v) ? strdup(json_string_value(v)) : jsonout_dumps(v);
		if (!txt)
			return;
		fputc('"', f);
		for (char *p = txt; *p; p++) {
			if (*p == '"')
				fputc('"', f);
			fputc(*p, f);
		}
		fputc('"', f);
		free(txt);
	}
}

static int
write_csv(runlog *l, const json_t *rec)
{
	size_t nc = sizeof(csv_cols) / sizeof(csv_cols[0]);
	if (!l->header_done) {
		for (size_t i = 0; i < nc; i++)
			fprintf(l->f, "%s%s", i ? "," : "", csv_cols[i]);
		fputs("\r\n", l->f);
		l->header_done = 1;
	}
	const json_t *ev = json_object_get(rec, "event");
	const json_t *st = json_object_get(rec, "staleness");
	const json_t *age = json_object_get(rec, "age_ms");
	const char *kind = json_is_string(ev) ? json_string_value(ev)
			   : json_object_get(rec, "model") ? "run"
							   : "eval";
	for (size_t i = 0; i < nc; i++) {
		const char *c = csv_cols[i];
		if (i)
			fputc(',', l->f);
		if (!strcmp(c, "kind"))
			fputs(kind, l->f);
		else if (!strncmp(c, "staleness_", 10))
			csv_field(l->f, st ? json_object_get(st, c + 10) : NULL);
		else if (!strcmp(c, "age_ms_mean"))
			csv_field(l->f, age ? json_object_get(age, "mean") : NULL);
		else if (!strcmp(c, "detail")) {
			if (!strcmp(kind, "set") || !strcmp(kind, "diverged") || !strcmp(kind, "remote") ||
			    !strcmp(kind, "split")) {
				json_t *d = json_deep_copy(rec);
				json_object_del(d, "t");
				json_object_del(d, "v");
				json_object_del(d, "run");
				csv_field(l->f, d);
				json_decref(d);
			} else if (!strcmp(kind, "run")) {
				csv_field(l->f, rec);
			} else {
				csv_field(l->f, json_object_get(rec, "stop"));
			}
		} else {
			csv_field(l->f, json_object_get(rec, c));
		}
	}
	fputs("\r\n", l->f);
	return fflush(l->f) == 0 && !ferror(l->f) ? 0 : -SL_EIO;
}

int
runlog_write(runlog *l, const json_t *rec)
{
	if (!rec)
		return -SL_EINVAL;
	if (l->csv)
		return write_csv(l, rec);
	char *s = jsonout_dumps(rec);
	if (!s)
		return -SL_ENOMEM;
	size_t n = strlen(s) + 1;
	s[n - 1] = '\n'; /* replace the NUL: the line goes in one write(2) */
	/* past stdio, so no buffer splits it: a kill -9 leaves every line
	 * whole but, at worst, the one in flight */
	int ok = fflush(l->f) == 0 && cli_write_all(fileno(l->f), s, n) == 0;
	free(s);
	return ok ? 0 : -SL_EIO;
}

void
runlog_close(runlog *l)
{
	if (l->f && l->own)
		fclose(l->f);
	l->f = NULL;
}

/* a run object: a record with "model" and no "event" */
static int
is_run_object(const json_t *rec)
{
	return json_is_object(rec) && !json_object_get(rec, "event") &&
	       json_object_get(rec, "model");
}

static int
is_event(const json_t *rec, const char *name)
{
	const json_t *ev = json_object_get(rec, "event");
	return json_is_string(ev) && !strcmp(json_string_value(ev), name);
}

/* the first line that a run resumed at v does not keep (see
 * runlog_continue); len when it keeps them all */
static size_t
continue_cut(const char *text, size_t len, uint64_t v)
{
	const char *nl = memchr(text, '\n', len);
	for (size_t off = nl ? (size_t)(nl - text) + 1 : len; off < len;) {
		nl = memchr(text + off, '\n', len - off);
		if (!nl)
			return off; /* partial */
		size_t n = (size_t)(nl - (text + off));
		json_t *rec = json_loadb(text + off, n, 0, NULL);
		json_t *rv = json_object_get(rec, "v");
		int past = !json_is_object(rec) || is_event(rec, "end") ||
			   (json_is_integer(rv) && (uint64_t)json_integer_value(rv) > v);
		json_decref(rec);
		if (past)
			return off;
		off += n + 1;
	}
	return len;
}

int
runlog_continue(const char *path, uint64_t v, const run_config *cfg,
		long *cut, char *err)
{
	static const char *const same[] = {"model", "dataset", "seed", "clock"};
	uint8_t *buf;
	size_t len;
	char e2[SL_ERR_LEN];
	struct stat st;
	*cut = 0;
	if (stat(path, &st) < 0 && errno == ENOENT)
		return 0;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return 0; /* /dev/null, a pipe: nothing to continue */
	if (ds_read_file(path, (size_t)1 << 34, &buf, &len, e2) < 0)
		return sl_fail(err, SL_EIO, "--log: %s", e2);
	const char *text = (const char *)buf;
	const char *nl = memchr(text, '\n', len);
	json_t *first = nl ? json_loadb(text, (size_t)(nl - text), 0, NULL) : NULL;
	json_t *want = config_to_json(cfg);
	int rc = 0;
	if (len && !is_run_object(first))
		rc = sl_fail(err, SL_EINVAL,
			     "--log: %s exists and is not a JSON-Lines run log (its first line "
			     "is no run object); a resumed run continues its own log: give it, "
			     "or a new file", path);
	for (size_t i = 0; rc == 0 && len && i < sizeof(same) / sizeof(same[0]); i++)
		if (!json_equal(json_object_get(first, same[i]), json_object_get(want, same[i])))
			rc = sl_fail(err, SL_EINVAL,
				     "--log: %s is another run's log (its %s differs from the "
				     "checkpoint's); a resumed run continues its own log: give it, "
				     "or a new file", path, same[i]);
	json_decref(first);
	json_decref(want);
	size_t keep = rc == 0 ? continue_cut(text, len, v) : len;
	for (size_t i = keep; i < len; i++)
		*cut += text[i] == '\n' || i + 1 == len;
	free(buf);
	if (rc < 0 || len == 0)
		return rc;
	int fd = open(path, O_WRONLY);
	if (fd < 0 || (keep < len && ftruncate(fd, (off_t)keep) < 0) || fsync(fd) < 0) {
		rc = sl_fail(err, SL_EIO, "--log: cannot cut %s back to v %llu: %s", path,
			     (unsigned long long)v, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	return rc < 0 ? rc : 1;
}

json_t *
runlog_run_object(const run_config *cfg, const char *device)
{
	const char *kernel, *config, *isa;
	backend_cpu_blas(&kernel, &config, &isa);
	json_t *o = config_to_json(cfg);
	if (device)
		json_object_set_new(o, "device", json_string(device));
	json_object_set_new(o, "t", json_real(0));
	json_object_set_new(o, "v", json_integer(0));
	const char *lib, *why = backend_cpu_blas_why(&lib);
	json_t *b = json_pack("{s:s,s:s,s:s,s:s}", "kernel", kernel ? kernel : "", "config",
			      config ? config : "", "isa", isa, "why", why);
	if (*lib)
		json_object_set_new(b, "library", json_string(lib));
	json_object_set_new(o, "blas", b);
	return o;
}

void
runlog_strip(json_t *obj)
{
	static const char *const keys[] = {"t", "v", "run", "blas", "resumed", "recovered"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		json_object_del(obj, keys[i]);
}

/* a change record as a schedule entry at its version; NULL to skip it */
static json_t *
change_entry(const json_t *rec)
{
	json_t *v = json_object_get(rec, "v"), *set = json_object_get(rec, "set");
	if (!json_is_integer(v) || !json_is_object(set))
		return NULL;
	json_t *copy = json_deep_copy(set);
	json_object_del(copy, "checkpoint"); /* a replay writes no files */
	if (!json_object_size(copy)) {
		json_decref(copy);
		return NULL;
	}
	json_t *e = json_pack("{s:{s:O},s:o}", "at", "v", v, "set", copy);
	json_t *w = json_object_get(rec, "worker");
	if (w)
		json_object_set(e, "worker", w);
	return e;
}

int
runlog_replay(const char *text, size_t len, int want, json_t **conf,
	      runlog_replay_info *info, char *err)
{
	memset(info, 0, sizeof(*info));
	*conf = NULL;
	if (len >= 5 && !memcmp(text, "kind,", 5))
		return sl_fail(err, SL_EINVAL,
			       "a CSV log cannot be replayed: replay needs the JSON-Lines log "
			       "(--log-format jsonl, the default)");
	json_t *obj = NULL, *sched = NULL, *end = NULL; /* the chosen run object */
	uint64_t last_v = 0;
	int lineno = 0, rc = 0;
	for (size_t off = 0; off < len && rc == 0;) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		const char *line = text + off;
		off += n + (nl ? 1 : 0);
		lineno++;
		json_error_t je;
		json_t *rec = n ? json_loadb(line, n, 0, &je) : NULL;
		if (!json_is_object(rec)) {
			/* a killed writer leaves a partial line: skip it */
			if (lineno == 1)
				rc = sl_fail(err, SL_EINVAL, "1: %s",
					     rec ? "expected a run object" : n ? je.text : "empty line");
			else if (n)
				info->skipped++;
			json_decref(rec);
			continue;
		}
		if (is_run_object(rec) && info->runs &&
		    json_is_true(json_object_get(rec, "resumed")) && !json_object_get(rec, "run")) {
			/* `stalelab run --resume` continuing this log: the same run
			 * goes on (its "resume" changes are part of it) */
			json_decref(rec);
			continue;
		}
		if (is_run_object(rec)) {
			info->runs++;
			if (want == 0 || info->runs == want) {
				json_decref(obj);
				json_decref(sched);
				json_decref(end);
				obj = json_incref(rec);
				sched = json_array();
				end = NULL;
				last_v = 0;
				info->run = info->runs;
				info->changes = 0;
			} else if (info->runs > want) {
				json_decref(rec);
				break;
			}
		} else if (obj && info->run == info->runs) {
			/* records of the chosen run (a daemon's carry its number) */
			json_t *rid = json_object_get(rec, "run"), *mine = json_object_get(obj, "run");
			json_t *v = json_object_get(rec, "v");
			if (rid && mine && !json_equal(rid, mine)) {
				json_decref(rec);
				continue;
			}
			if (json_is_integer(v) && (uint64_t)json_integer_value(v) > last_v)
				last_v = (uint64_t)json_integer_value(v);
			if (is_event(rec, "set")) {
				json_t *e = change_entry(rec);
				if (e) {
					json_array_append_new(sched, e);
					info->changes++;
				}
			} else if (is_event(rec, "end")) {
				json_decref(end);
				end = json_incref(rec);
			}
		}
		json_decref(rec);
	}
	if (rc == 0 && !obj)
		rc = want > 0 && info->runs
			     ? sl_fail(err, SL_EINVAL, "--run %d: the log holds %d run%s", want,
				       info->runs, info->runs == 1 ? "" : "s")
			     : sl_fail(err, SL_EINVAL, "no run object in the log");
	if (rc == 0 && json_is_true(json_object_get(obj, "resumed")))
		rc = sl_fail(err, SL_EINVAL,
			     "run %d was resumed from a checkpoint: a replay starts from the "
			     "beginning, so it needs the log of the run that wrote the checkpoint",
			     info->run);
	if (rc < 0) {
		json_decref(obj);
		json_decref(sched);
		json_decref(end);
		return rc;
	}
	json_t *blas = json_object_get(obj, "blas");
	json_t *kernel = json_is_object(blas) ? json_object_get(blas, "kernel") : NULL;
	json_t *isa = json_is_object(blas) ? json_object_get(blas, "isa") : NULL;
	json_t *dev = json_object_get(obj, "device");
	if (json_is_string(kernel))
		snprintf(info->kernel, sizeof(info->kernel), "%s", json_string_value(kernel));
	if (json_is_string(isa))
		snprintf(info->isa, sizeof(info->isa), "%s", json_string_value(isa));
	if (json_is_string(dev))
		snprintf(info->device, sizeof(info->device), "%s", json_string_value(dev));
	json_t *c = json_deep_copy(obj);
	runlog_strip(c);
	json_object_set(c, "schedule", sched);
	json_object_set_new(c, "clock", json_string("virtual"));
	/* stop where the logged obj stopped, unless it stopped by its own
	 * stop condition in versions, samples or accuracy (those replay) */
	const json_t *why = end ? json_object_get(end, "stop") : NULL;
	const char *reason = json_is_string(why) ? json_string_value(why) : "";
	json_t *ev = end ? json_object_get(end, "v") : NULL;
	uint64_t stop_v = json_is_integer(ev) ? (uint64_t)json_integer_value(ev) : last_v;
	if (strcmp(reason, "epochs") && strcmp(reason, "steps") &&
	    strcmp(reason, "target_acc") && stop_v > 0) {
		json_object_set_new(c, "stop", json_pack("{s:I}", "steps", (json_int_t)stop_v));
		snprintf(info->stop_from, sizeof(info->stop_from), "%s", end ? "end" : "last");
		info->stop_v = stop_v;
	}
	json_decref(obj);
	json_decref(sched);
	json_decref(end);
	*conf = c;
	return 0;
}
