/* ckpt.h - checkpoint files: written to a temporary file, fsync'd and
 * renamed into place (a crash leaves the old file or the new, never half of
 * one); read back whole. */
#ifndef SL_CKPT_H
#define SL_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* Write buf to path: temporary file, fsync, rename, fsync the folder. */
int ckpt_write_buf(const char *path, const uint8_t *buf, size_t len, char *err);

/* Checkpoint r into *buf (malloc'd; caller frees); *v: the version the
 * checkpoint holds, the one a resume starts at. */
int ckpt_take(run *r, uint8_t **buf, size_t *len, uint64_t *v, char *err);

/* Checkpoint r into path. On success *bytes and *v (the version saved)
 * say what was written. */
int ckpt_write(run *r, const char *path, size_t *bytes, uint64_t *v, char *err);

/* Read a checkpoint file (at most 4 GiB) and its run object. *buf is
 * malloc'd (caller frees). */
int ckpt_read(const char *path, uint8_t **buf, size_t *len, run_config *cfg,
	      char *err);

#endif
