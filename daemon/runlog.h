/* runlog.h - JSON Lines run logs: one compact record per line, flushed as
 * it is written, so a killed process loses at most the record in flight. */
#ifndef SL_RUNLOG_H
#define SL_RUNLOG_H

#include <jansson.h>
#include <stdio.h>

typedef struct runlog {
	FILE *f;
	int own; /* fclose on close */
	char path[512];
} runlog;

/* path NULL or "-": stdout. Truncates an existing file. */
int runlog_open(runlog *l, const char *path, char *err);
/* Write rec (not consumed) as one line and flush; 0 or -SL_EIO. */
int runlog_write(runlog *l, const json_t *rec);
void runlog_close(runlog *l);

#endif
