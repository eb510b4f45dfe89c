/* ckpt.c - checkpoint files. */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"

int
ckpt_write_buf(const char *path, const uint8_t *buf, size_t len, char *err)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return sl_fail(err, SL_EIO, "path: cannot create %s: %s", tmp, strerror(errno));
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	int ok = off == len && fsync(fd) == 0;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return sl_fail(err, SL_EIO, "path: cannot write %s: %s", path, strerror(e));
	}
	/* make the rename itself durable */
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s", path);
	int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int
ckpt_take(run *r, uint8_t **buf, size_t *len, uint64_t *v, char *err)
{
	int rc = run_checkpoint(r, buf, len, err);
	if (rc == 0 && (rc = run_checkpoint_version(*buf, *len, v, err)) < 0) {
		free(*buf);
		*buf = NULL;
	}
	return rc;
}

int
ckpt_write(run *r, const char *path, size_t *bytes, uint64_t *v, char *err)
{
	uint8_t *buf;
	size_t len;
	int rc = ckpt_take(r, &buf, &len, v, err);
	if (rc < 0)
		return rc;
	rc = ckpt_write_buf(path, buf, len, err);
	free(buf);
	if (rc == 0)
		*bytes = len;
	return rc;
}

int
ckpt_read(const char *path, uint8_t **buf, size_t *len, run_config *cfg,
	  char *err)
{
	char e2[SL_ERR_LEN];
	int rc = ds_read_file(path, (size_t)4 << 30, buf, len, e2);
	if (rc < 0)
		return sl_fail(err, SL_EIO, "resume: %s", e2);
	if ((rc = run_checkpoint_config(*buf, *len, cfg, e2)) < 0) {
		free(*buf);
		*buf = NULL;
		return sl_fail(err, SL_EFORMAT, "resume: %s: %s", path, e2);
	}
	return 0;
}
