/* ckpt.c - checkpoint files. */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "dataset.h"
#include "tlv.h"

int
ckpt_write_buf(const char *path, const uint8_t *buf, size_t len, char *err)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	/* not through a link planted under the temporary name */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return sl_fail(err, SL_EIO, "path: cannot create %s: %s", tmp, strerror(errno));
	int ok = cli_write_all(fd, buf, len) == 0 && fsync(fd) == 0;
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
ckpt_replaceable(const char *path, const char *field, char *err)
{
	char head[sizeof(TLV_MAGIC) - 1];
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : sl_fail(err, SL_EINVAL, "%s: %.200s: %s", field,
						      path, strerror(errno));
	int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		 read(fd, head, sizeof(head)) == (ssize_t)sizeof(head) &&
		 !memcmp(head, TLV_MAGIC, sizeof(head));
	close(fd);
	return ok ? 0 : sl_fail(err, SL_EINVAL, "%s: %.200s exists and is not a checkpoint "
				"(a request replaces checkpoints only): name another file",
				field, path);
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

/* ---- a checkpoint directory ---------------------------------------------- */

#define DIR_PREFIX "stalelab-v"
#define DIR_SUFFIX ".ckpt"

void
ckpt_dir_path(const char *dir, uint64_t v, char *out, size_t cap)
{
	snprintf(out, cap, "%s/" DIR_PREFIX "%llu" DIR_SUFFIX, dir, (unsigned long long)v);
}

/* the version a file name stands for: 0 and *v, or -1 when it is not one of
 * ours; tmp: a temporary file of ckpt_write_buf (NAME.ckpt.tmp.PID) */
static int
dir_name_version(const char *name, uint64_t *v, int *tmp)
{
	size_t np = strlen(DIR_PREFIX), ns = strlen(DIR_SUFFIX);
	if (strncmp(name, DIR_PREFIX, np) || name[np] < '0' || name[np] > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long u = strtoull(name + np, &end, 10);
	if (errno || strncmp(end, DIR_SUFFIX, ns))
		return -1;
	*v = u;
	*tmp = end[ns] != 0;
	return *tmp && strncmp(end + ns, ".tmp.", 5) ? -1 : 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* every checkpoint (tmp 0) or temporary file (tmp 1) in dir */
static int
dir_scan(const char *dir, int want_tmp, uint64_t **vs, char ***names, int *n,
	 char *err)
{
	*vs = NULL;
	if (names)
		*names = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return sl_fail(err, SL_EIO, "cannot read the directory %s: %s", dir,
			       strerror(errno));
	int cap = 0, rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		uint64_t v;
		int tmp;
		if (dir_name_version(e->d_name, &v, &tmp) < 0 || tmp != want_tmp)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 8;
			uint64_t *nv = realloc(*vs, sizeof(uint64_t) * (size_t)cap);
			char **nn = names ? realloc(*names, sizeof(char *) * (size_t)cap) : NULL;
			if (nv)
				*vs = nv;
			if (nn)
				*names = nn;
			if (!nv || (names && !nn)) {
				rc = sl_fail(err, SL_ENOMEM, "out of memory");
				break;
			}
		}
		(*vs)[*n] = v;
		if (names && !((*names)[*n] = strdup(e->d_name))) {
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
			break;
		}
		(*n)++;
	}
	closedir(d);
	if (rc < 0 || *n == 0) {
		for (int i = 0; names && *names && i < *n; i++)
			free((*names)[i]);
		free(*vs);
		*vs = NULL;
		if (names) {
			free(*names);
			*names = NULL;
		}
		*n = 0;
	}
	return rc;
}

int
ckpt_dir_list(const char *dir, uint64_t **vs, int *n, char *err)
{
	int rc = dir_scan(dir, 0, vs, NULL, n, err);
	if (rc == 0 && *n > 1)
		qsort(*vs, (size_t)*n, sizeof(uint64_t), cmp_u64);
	return rc;
}

int
ckpt_dir_put(const char *dir, const uint8_t *buf, size_t len, uint64_t v,
	     int keep, char *err)
{
	char path[4200];
	ckpt_dir_path(dir, v, path, sizeof(path));
	int rc = ckpt_write_buf(path, buf, len, err);
	if (rc == 0) /* the new one is in place: the old ones can go */
		ckpt_dir_prune(dir, keep);
	return rc;
}

void
ckpt_dir_prune(const char *dir, int keep)
{
	char path[4200];
	uint64_t *vs;
	int n;
	char **names, e2[SL_ERR_LEN];
	if (ckpt_dir_list(dir, &vs, &n, e2) == 0) {
		for (int i = 0; i + keep < n; i++) {
			ckpt_dir_path(dir, vs[i], path, sizeof(path));
			unlink(path);
		}
		free(vs);
	}
	if (dir_scan(dir, 1, &vs, &names, &n, e2) == 0) {
		for (int i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			unlink(path);
			free(names[i]);
		}
		free(names);
		free(vs);
	}
}

int
ckpt_dir_newest(const char *dir, char *out, size_t cap, char *err)
{
	uint64_t *vs;
	int n;
	int rc = ckpt_dir_list(dir, &vs, &n, err);
	if (rc < 0)
		return rc;
	if (n == 0)
		return sl_fail(err, SL_EINVAL, "%s holds no checkpoint (" DIR_PREFIX "V" DIR_SUFFIX ")",
			       dir);
	ckpt_dir_path(dir, vs[n - 1], out, cap);
	free(vs);
	return 0;
}
