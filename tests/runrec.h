/* runrec.h - for the Check suites that run the engine: a run's
 * evaluation records and changes, collected through its callbacks. */
#ifndef SL_RUNREC_H
#define SL_RUNREC_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

#define REC_EVALS 256
#define REC_CHANGES 16

typedef struct rec {
	run_eval ev[REC_EVALS];
	int n;
	uint64_t change_v[REC_CHANGES];
	unsigned change_fields[REC_CHANGES];
	int n_change;
} rec;

static inline void
on_eval(void *ud, const run_eval *e)
{
	rec *r = ud;
	if (r->n < REC_EVALS)
		r->ev[r->n++] = *e;
}

static inline void
on_change(void *ud, double t, uint64_t v, const run_cmd *c)
{
	(void)t;
	rec *r = ud;
	if (r->n_change < REC_CHANGES) {
		r->change_v[r->n_change] = v;
		r->change_fields[r->n_change++] = c->fields;
	}
}

/* a run's records and its last checkpoint (on_ckpt, the checkpoint
 * callback, keeps a copy) */
typedef struct ckrec {
	rec r;
	uint8_t *buf;
	size_t len;
} ckrec;

static inline void
on_ckpt(void *ud, const run_cmd *c, const uint8_t *buf, size_t len)
{
	ckrec *k = ud;
	ck_assert(c->fields & CMD_CHECKPOINT);
	ck_assert_ptr_nonnull(buf);
	free(k->buf);
	k->buf = malloc(len);
	memcpy(k->buf, buf, len);
	k->len = len;
}

#endif
