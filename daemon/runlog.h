/* runlog.h - JSON Lines run logs: one compact record per line, flushed as
 * it is written, so a killed process loses at most the record in flight. */
#ifndef SL_RUNLOG_H
#define SL_RUNLOG_H

#include <jansson.h>
#include <stdio.h>

typedef struct runlog {
	FILE *f;
	int own; /* fclose on close */
	int csv; /* flat CSV instead of JSON Lines */
	int header_done;
	char path[512];
} runlog;

/* path NULL or "-": stdout. Truncates an existing file (append: keeps it).
 * format: "jsonl" or "csv" (RFC 4180: a header row, then one row per
 * record: kind,run,t,v,epoch,samples,train_loss,test_loss,test_acc,
 * best_acc,samples_per_s,staleness_mean,staleness_p50,staleness_p99,
 * staleness_max,age_ms_mean,detail; detail holds a change's JSON). */
int runlog_open(runlog *l, const char *path, const char *format, int append,
		char *err);
/* Write rec (not consumed) as one line and flush; 0 or -SL_EIO. */
int runlog_write(runlog *l, const json_t *rec);
void runlog_close(runlog *l);

#endif
