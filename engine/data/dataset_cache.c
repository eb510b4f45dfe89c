/* dataset_cache.c - a decoded image split kept on disk, shared by every
 * process that reads it.
 *
 * Decoding Fashion-MNIST (26 MB of gzip into 188 MB of floats) costs a
 * process about a second and a half of CPU, most of it the kernel zeroing
 * fresh pages; make test starts hundreds of processes on it. So a split
 * read from files (IDX, CIFAR-10) is written once, decoded, to
 *
 *     $STALELAB_CACHE, else $XDG_CACHE_HOME/stalelab, else ~/.cache/stalelab
 *
 * as ds-<name>.f32 (name: a hash of the files' canonical paths), and later
 * loads map that file (MAP_PRIVATE: the pages
 * are the page cache's, shared between processes; a write to them makes a
 * private copy, so a process cannot change the file). The key in its
 * header hashes each source file's path, device, inode, size and
 * modification time and this layout's version, so an edited, replaced or
 * touched source is decoded again, and its new cache file replaces the
 * old one. File times tick in steps of a few milliseconds, so a file
 * rewritten at the same size within one step keeps its time: a split is
 * therefore stored only when every source is at least CACHE_SETTLE
 * seconds old (git's "racy" rule), and a later rewrite gives it a newer
 * time. A cache file is written under a temporary name and renamed, so a
 * reader never sees half of one; one that does not match its header
 * (truncated, another version, another key) is ignored and rewritten.
 * STALELAB_CACHE=off (or empty) turns the cache off. Any failure of the
 * cache (no home, a read-only disk, no space) only costs the decode: the
 * split is then loaded as before, and nothing is reported.
 *
 * Layout, all little-endian as the machine writes it (the key covers the
 * byte order and sizeof(float) through the version):
 *   0    8 bytes  magic "SLDSC01\n"
 *   8    u64      key
 *   16   u32 n, i32 c, h, w, classes, ylen
 *   40   u64      bytes of y (n * ylen)
 *   48   u64      total file size
 *   4096          y, then zeros up to a multiple of 4096, then x (n*dim
 *                 floats). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataset_impl.h"

#define CACHE_MAGIC "SLDSC01\n"
#define CACHE_HDR 4096u
#define CACHE_PAGE 4096u
#define CACHE_SETTLE 2

typedef struct cache_hdr {
	char magic[8];
	uint64_t key;
	uint32_t n;
	int32_t c, h, w, classes, ylen;
	uint64_t ybytes;
	uint64_t total;
} cache_hdr;

static size_t
round_page(size_t v)
{
	return (v + CACHE_PAGE - 1) & ~(size_t)(CACHE_PAGE - 1);
}

static uint64_t
fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* the cache directory into dir (created, 0700 for a new one), or -1 */
static int
cache_dir(char *dir, size_t cap)
{
	const char *env = getenv("STALELAB_CACHE");
	int k;
	if (env) {
		if (!*env || !strcmp(env, "off"))
			return -1;
		k = snprintf(dir, cap, "%s", env);
	} else if ((env = getenv("XDG_CACHE_HOME")) && *env == '/') {
		k = snprintf(dir, cap, "%s/stalelab", env);
	} else if ((env = getenv("HOME")) && *env == '/') {
		k = snprintf(dir, cap, "%s/.cache/stalelab", env);
	} else {
		return -1;
	}
	if (k < 0 || (size_t)k >= cap)
		return -1;
	/* mkdir -p */
	for (char *s = dir + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		int rc = mkdir(dir, 0700);
		*s = '/';
		if (rc && errno != EEXIST)
			return -1;
	}
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -1;
	struct stat st;
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* The sources' names and their key: *name hashes their canonical paths
 * (so one data set has one cache file, replaced when its files change),
 * the key adds what stat says of each. -1 when one cannot be resolved. */
static int
cache_key(const char *const *paths, int npaths, uint64_t *name, uint64_t *key)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, CACHE_MAGIC, 8);
	uint32_t fsz = sizeof(float), one = 1;
	h = fnv(h, &fsz, sizeof fsz);
	h = fnv(h, &one, sizeof one); /* byte order */
	uint64_t k = h;
	for (int i = 0; i < npaths; i++) {
		struct stat st;
		char real[PATH_MAX];
		if (!realpath(paths[i], real) || stat(real, &st))
			return -1;
		int64_t f[6] = {(int64_t)st.st_dev, (int64_t)st.st_ino, (int64_t)st.st_size,
				(int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec, i};
		h = fnv(h, real, strlen(real) + 1);
		k = fnv(k, real, strlen(real) + 1);
		k = fnv(k, f, sizeof f);
	}
	*name = h;
	*key = k ? k : 1;
	return 0;
}

static int
cache_path(char *path, size_t cap, const char *const *paths, int npaths, uint64_t *key)
{
	char dir[4096];
	uint64_t name;
	if (cache_dir(dir, sizeof dir) || cache_key(paths, npaths, &name, key))
		return -1;
	int k = snprintf(path, cap, "%s/ds-%016llx.f32", dir, (unsigned long long)name);
	return k < 0 || (size_t)k >= cap ? -1 : 0;
}

/* a header that is ours and whose sizes agree with each other and with
 * the file's */
static int
hdr_ok(const cache_hdr *h, uint64_t key, uint64_t file_size)
{
	if (memcmp(h->magic, CACHE_MAGIC, 8) || h->key != key || !h->n || h->c < 1 ||
	    h->h < 1 || h->w < 1 || h->classes < 1 || h->classes > 256 || h->ylen < 1 ||
	    (uint64_t)h->c * (uint64_t)h->h * (uint64_t)h->w > (1u << 24))
		return 0;
	uint64_t dim = (uint64_t)h->c * (uint64_t)h->h * (uint64_t)h->w;
	uint64_t yb = (uint64_t)h->n * (uint64_t)h->ylen;
	uint64_t total = CACHE_HDR + round_page(yb) + (uint64_t)h->n * dim * sizeof(float);
	return h->ybytes == yb && h->total == total && file_size == total;
}

int
ds_cache_load(const char *const *paths, int npaths, dataset *out)
{
	char path[4200];
	uint64_t key;
	if (cache_path(path, sizeof path, paths, npaths, &key))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	cache_hdr h;
	void *map = MAP_FAILED;
	if (fstat(fd, &st) == 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
	    hdr_ok(&h, key, (uint64_t)st.st_size))
		map = mmap(NULL, (size_t)h.total, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return 0;
	uint8_t *base = map;
	uint8_t *y = base + CACHE_HDR;
	for (uint64_t i = 0; i < h.ybytes; i++)
		if (y[i] >= (unsigned)h.classes) { /* not what we wrote */
			munmap(map, (size_t)h.total);
			return 0;
		}
	memset(out, 0, sizeof *out);
	out->n = h.n;
	out->c = h.c;
	out->h = h.h;
	out->w = h.w;
	out->dim = h.c * h.h * h.w;
	out->classes = h.classes;
	out->ylen = h.ylen;
	out->y = y;
	out->x = (float *)(void *)(base + CACHE_HDR + round_page(h.ybytes));
	out->map = map;
	out->map_len = (size_t)h.total;
	return 1;
}

static int
write_all(int fd, const void *p, size_t len)
{
	const char *b = p;
	while (len) {
		ssize_t k = write(fd, b, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k;
		len -= (size_t)k;
	}
	return 0;
}

int
ds_cache_store(const char *const *paths, int npaths, const dataset *d)
{
	char path[4200], tmp[4300];
	uint64_t key;
	if (!d->n || !d->x || !d->y || cache_path(path, sizeof path, paths, npaths, &key))
		return -1;
	time_t now = time(NULL);
	for (int i = 0; i < npaths; i++) {
		struct stat st;
		if (stat(paths[i], &st) || st.st_mtim.tv_sec > now - CACHE_SETTLE)
			return -1; /* too fresh to tell a rewrite by its time */
	}
	cache_hdr h;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, CACHE_MAGIC, 8);
	h.key = key;
	h.n = d->n;
	h.c = d->c;
	h.h = d->h;
	h.w = d->w;
	h.classes = d->classes;
	h.ylen = ds_ylen(d);
	h.ybytes = (uint64_t)d->n * (uint64_t)h.ylen;
	size_t xbytes = (size_t)d->n * (size_t)d->dim * sizeof(float);
	h.total = CACHE_HDR + round_page(h.ybytes) + xbytes;
	if (!hdr_ok(&h, key, h.total))
		return -1;
	snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	static const uint8_t zeros[CACHE_PAGE];
	uint8_t head[CACHE_HDR];
	memset(head, 0, sizeof head);
	memcpy(head, &h, sizeof h);
	size_t ypad = round_page(h.ybytes) - h.ybytes;
	int rc = write_all(fd, head, sizeof head) || write_all(fd, d->y, h.ybytes) ||
		 write_all(fd, zeros, ypad) || write_all(fd, d->x, xbytes);
	if (close(fd))
		rc = -1;
	if (!rc && rename(tmp, path))
		rc = -1;
	if (rc)
		unlink(tmp);
	return rc ? -1 : 0;
}
