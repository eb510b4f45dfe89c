/* ckpt_doc.h - a checkpoint file read and checked whole, before anything
 * of a run is changed: the document ckpt_read.c reads (touching no run)
 * and checkpoint.c loads into the run. Private to the run's checkpoint
 * files (checkpoint.c, ckpt_read.c). */
#ifndef SL_CKPT_DOC_H
#define SL_CKPT_DOC_H

#include "ckpt_fields.h"

/* format 2: tagged fields (format 1 was the raw struct dump) */
#define CKPT_FORMAT 2
#define CKPT_MIN_READER 2

/* What a checkpoint holds, read and checked before anything is loaded. */
typedef struct ckpt_held {
	held h;
	const void *grad, *bak;
} ckpt_held;

typedef struct ckpt_worker {
	worker w;
	const void *batch, *params, *grads, *ms, *wprev;
	const void *ef; /* error feedback's residual (optional) */
	const void *delta; /* demo's momentum (optional) */
	const void *opt_m, *opt_v, *opt_steps; /* the worker's optimiser (optional) */
	size_t n_opt_steps;
} ckpt_worker;

typedef struct ckpt_doc {
	run_config cfg;
	uint64_t n_params, n_train;
	const void *vocab;    /* meta.vocab (text runs), NULL when absent */
	size_t vocab_n;
	run *sh;              /* the run's scalars (a shadow, never started) */
	const rule_class *rule;
	double wall_s;
	const void *win_tau, *win_t, *perm;
	size_t win_n;
	run_eval *series;
	int n_series;
	vevent *ev;
	int n_ev;
	run_sched *sched;
	int n_sched;
	int n_vh;
	uint64_t vh_v[VHIST_MAX];
	const void *vh[VHIST_MAX];
	tlv_sec server;
	ckpt_held *held;
	int n_held;
	ckpt_worker *w;
	int n_w;
	ledger *led;
} ckpt_doc;

/* The file buf[0..len) read and checked into d (its pointers into buf;
 * skip_crc: the fuzz target's, no checksum check): 0, or < 0 with err
 * naming the field. d is to be freed with ckpt_doc_free either way. */
int ckpt_read_doc(const uint8_t *buf, size_t len, int skip_crc, ckpt_doc *d, char *err);
void ckpt_doc_free(ckpt_doc *d);
/* whether the checkpoint's vocabulary (none for images) is the data set's */
int ckpt_same_vocab(const ckpt_doc *d, const dataset_pair *data);

#endif
