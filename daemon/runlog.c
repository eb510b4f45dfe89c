/* runlog.c - JSON Lines writer. */
#include "runlog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jsonout.h"
#include "sl.h"

int
runlog_open(runlog *l, const char *path, const char *format, int append,
	    char *err)
{
	memset(l, 0, sizeof(*l));
	if (format && strcmp(format, "jsonl") && strcmp(format, "csv"))
		return sl_fail(err, SL_EINVAL,
			       "log-format: unknown \"%s\" (expected jsonl or csv)", format);
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
		return sl_fail(err, SL_EIO, "log: cannot open %s: %s", path,
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
			if (!strcmp(kind, "set")) {
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
	size_t n = strlen(s);
	s[n] = '\n'; /* replace the NUL: write the line in one call */
	int ok = fwrite(s, 1, n + 1, l->f) == n + 1 && fflush(l->f) == 0;
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
