/* ckpt.h - checkpoint files: written to a temporary file, fsync'd and
 * renamed into place (a crash leaves the old file or the new, never half of
 * one); read back whole. */
#ifndef SL_CKPT_H
#define SL_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* Write buf to path: temporary file, fsync, rename, fsync the folder. */
SL_MUST_USE int ckpt_write_buf(const char *path, const uint8_t *buf, size_t len, char *err);

/* 0 when path may be replaced by a checkpoint: no such file, or one that
 * is a checkpoint already; else -SL_EINVAL naming field (a request never
 * overwrites another file, such as the daemon's log, in the checkpoint
 * directory). */
int ckpt_replaceable(const char *path, const char *field, char *err);

/* Checkpoint r into *buf (malloc'd; caller frees); *v: the version the
 * checkpoint holds, the one a resume starts at. */
int ckpt_take(run *r, uint8_t **buf, size_t *len, uint64_t *v, char *err);

/* Checkpoint r into path. On success *bytes and *v (the version saved)
 * say what was written. */
SL_MUST_USE int ckpt_write(run *r, const char *path, size_t *bytes, uint64_t *v, char *err);

/* Read a checkpoint file (at most 4 GiB) and its run object. *buf is
 * malloc'd (caller frees). */
int ckpt_read(const char *path, uint8_t **buf, size_t *len, run_config *cfg,
	      char *err);

/* A checkpoint directory (stalelab run --checkpoint-dir): files named
 * stalelab-vV.ckpt for the version V they resume at, written with
 * ckpt_write_buf, so the newest one there is always whole. */

/* The versions of the checkpoints in dir, ascending (*vs malloc'd, caller
 * frees; NULL when none). Other files are ignored. -SL_EIO when dir cannot
 * be read. */
int ckpt_dir_list(const char *dir, uint64_t **vs, int *n, char *err);

/* path of version v in dir */
void ckpt_dir_path(const char *dir, uint64_t v, char *out, size_t cap);

/* Write buf (a checkpoint at version v) into dir, then ckpt_dir_prune. */
SL_MUST_USE int ckpt_dir_put(const char *dir, const uint8_t *buf, size_t len, uint64_t v,
		 int keep, char *err);

/* Delete all but the newest keep checkpoints in dir, and the temporary
 * files a killed writer left (a kill between a rename and this leaves one
 * too many). */
void ckpt_dir_prune(const char *dir, int keep);

/* The newest checkpoint in dir into out; -SL_EINVAL (err says so) when
 * there is none. */
int ckpt_dir_newest(const char *dir, char *out, size_t cap, char *err);

#endif
