/* runlog.h - JSON Lines run logs: one compact record per line, flushed as
 * it is written, so a killed process loses at most the record in flight. */
#ifndef SL_RUNLOG_H
#define SL_RUNLOG_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

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
SL_MUST_USE int runlog_write(runlog *l, const json_t *rec);
void runlog_close(runlog *l);

/* Make the JSON-Lines log at path ready for a run resumed from a
 * checkpoint at version v whose run object is cfg to append to it: cut
 * off, from the first such line on, a partial line (a killed writer's), an
 * unreadable one, an end record, or a record with "v" past v (the resumed
 * run writes those again), then fsync. The file's first record must be a
 * run object with cfg's model, dataset, seed and clock. 1: continue it
 * (*cut: lines cut off); 0: no such file, an empty one or no regular file
 * (/dev/null, a pipe): a fresh log;
 * negative with err naming the file and why (a CSV log, another run's). */
int runlog_continue(const char *path, uint64_t v, const run_config *cfg,
		    long *cut, char *err);

/* The first record of a run's log: the run object with every default
 * filled in ("device": the backend opened, when device is not NULL),
 * "t": 0, "v": 0 and "blas": {"kernel", "config", "isa"} (the OpenBLAS
 * kernel this process computes with and the instruction-set level of our
 * own kernels: the cpu backend's runs are bit for bit the same only with
 * the same ones). New reference. */
json_t *runlog_run_object(const run_config *cfg, const char *device);

/* Drop the keys a log adds to a run object (t, v, run, blas, resumed), so
 * a log's first record reads back as a run object. */
void runlog_strip(json_t *obj);

/* What runlog_replay found besides the run object. */
typedef struct runlog_replay_info {
	int runs;          /* run objects in the log */
	int run;           /* the one chosen, counted from 1 */
	int skipped;       /* unreadable lines skipped (a killed writer) */
	int changes;       /* change records turned into schedule entries */
	char kernel[64];   /* its "blas" kernel, "" when not recorded */
	char isa[16];      /* its "blas" isa (our kernels' clone), or "" */
	char device[16];   /* its "device" (the backend that ran), or "" */
	char stop_from[16]; /* "" or "end" / "last": where the stop came from */
	unsigned long long stop_v;
} runlog_replay_info;

/* A JSON-Lines log (text[0..len), a whole file) to the run object that
 * replays its run number `want` (counted from 1; 0 = the last): the run
 * object with log-only keys dropped, its change records ("event": "set",
 * whatever their origin, without "checkpoint") as a schedule at their
 * versions, the virtual clock, and the stop where the logged run stopped
 * (the version of its end record, or of its last record) unless it
 * stopped on its own epochs, steps or target_acc. Records of other runs,
 * evaluations, captions, checkpoints are skipped. Pure: no I/O. Errors
 * name the line ("3: ...") or say why (a CSV log, a resumed run). */
int runlog_replay(const char *text, size_t len, int want, json_t **conf,
		  runlog_replay_info *info, char *err);

#endif
