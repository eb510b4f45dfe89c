/* runlog.c - JSON Lines writer. */
#include "runlog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jsonout.h"
#include "sl.h"

int
runlog_open(runlog *l, const char *path, char *err)
{
	memset(l, 0, sizeof(*l));
	if (!path || !strcmp(path, "-")) {
		l->f = stdout;
		snprintf(l->path, sizeof(l->path), "<stdout>");
		return 0;
	}
	l->f = fopen(path, "w");
	if (!l->f)
		return sl_fail(err, SL_EIO, "log: cannot open %s: %s", path,
			       strerror(errno));
	l->own = 1;
	snprintf(l->path, sizeof(l->path), "%s", path);
	return 0;
}

int
runlog_write(runlog *l, const json_t *rec)
{
	if (!rec)
		return -SL_EINVAL;
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
