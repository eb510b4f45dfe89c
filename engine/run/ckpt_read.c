/* ckpt_read.c - a checkpoint file read and checked whole (ckpt_doc.h),
 * touching no run: its sections, lists and buffers against their sizes
 * and ranges, the rule's and the server's state through their own
 * checks. The pure run_checkpoint_check is the fuzz target; the other
 * run_checkpoint_* read one part of a file (its config, version,
 * vocabulary or weights) for the daemon. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_doc.h"
#include "optim.h"

#define MAX_SERIES (1 << 24)
#define MAX_EVENTS (1 << 24)
#define MAX_SCHED (1 << 20)
#define MAX_HELD (1 << 20)
#define CKPT_MAX_BATCH 65536

static int
open_file(const uint8_t *buf, size_t len, int skip_crc, tlv_sec *root, char *err)
{
	return tlv_read(buf, len, CKPT_FORMAT, skip_crc, root, NULL, err);
}

/* List `name` of parent, of at most max items, and (arr not NULL) a
 * zeroed array of n items of size bytes (NULL when empty). The item
 * count, 0 when absent and optional, or an error. */
static int
open_list(const tlv_sec *parent, const char *name, int req, int max, size_t size,
	  tlv_sec *list, void **arr, char *err)
{
	if (arr)
		*arr = NULL;
	list->p = NULL;
	list->n = 0;
	int rc = tlv_get_sec(parent, name, req, TLV_LIST, list, err);
	if (rc <= 0)
		return rc;
	size_t n = tlv_count(list);
	if (n > (size_t)max)
		return tlv_bad(err, parent, name, "has %zu entries (at most %d)", n, max);
	if (n && arr && !(*arr = calloc(n, size)))
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	return (int)n;
}

/* every sample index of the u32 array p[0..n) within the training set */
static int
check_samples(const tlv_sec *s, const char *name, const void *p, size_t n,
	      uint64_t n_train, char *err)
{
	for (size_t k = 0; k < n; k++) {
		uint32_t x;
		memcpy(&x, (const uint8_t *)p + 4 * k, 4);
		if (x >= n_train)
			return tlv_bad(err, s, name, "names sample %u of %llu", x,
				       (unsigned long long)n_train);
	}
	return 0;
}

static int
read_config(const tlv_sec *root, run_config *cfg, char *err)
{
	tlv_sec s, list, it;
	config_defaults(cfg);
	int rc = tlv_get_sec(root, "config", REQ, TLV_SEC, &s, err);
	if (rc < 0 || (rc = ckpt_get_fields(&s, &ckpt_config_tab, cfg, err)) < 0)
		return rc;
	cfg->n_overrides = 0;
	if ((rc = open_list(&s, "worker_overrides", OPT, CFG_MAX_OVERRIDES, 0, &list, NULL,
			    err)) < 0)
		return rc;
	size_t off = 0;
	int i = 0;
	while (tlv_item(&list, &off, &i, &it)) {
		worker_override *o = &cfg->overrides[cfg->n_overrides++];
		memset(o, 0, sizeof(*o));
		if ((rc = ckpt_get_fields(&it, &ckpt_override_tab, o, err)) < 0)
			return rc;
	}
	char e2[SL_ERR_LEN];
	if (config_validate(cfg, e2) < 0)
		return sl_fail(err, SL_EFORMAT, "checkpoint: config: %s", e2);
	return 0;
}

/* a list of table-described items into a malloc'd array (*out NULL when
 * empty); at most max items */
static int
read_list(const tlv_sec *parent, const char *name, int req, const ftable *t,
	  size_t size, int max, void **out, int *n_out, char *err)
{
	tlv_sec list, it;
	int n = open_list(parent, name, req, max, size, &list, out, err);
	*n_out = n > 0 ? n : 0;
	size_t off = 0;
	int i = 0, rc;
	while (n > 0 && tlv_item(&list, &off, &i, &it))
		if ((rc = ckpt_get_fields(&it, t, (uint8_t *)*out + size * (size_t)(i - 1),
					  err)) < 0)
			return rc;
	return n < 0 ? n : 0;
}

void
ckpt_doc_free(ckpt_doc *d)
{
	free(d->sh);
	free(d->series);
	free(d->ev);
	free(d->sched);
	free(d->held);
	free(d->w);
	free(d->led);
	memset(d, 0, sizeof(*d));
}

/* meta.vocab, present on a text run's checkpoint: 1..256 byte values in
 * increasing order (token id k is the byte vocab[k]) */
static int
read_vocab(const tlv_sec *meta, ckpt_doc *d, char *err)
{
	int rc = tlv_get_array(meta, "vocab", OPT, TLV_U32S, SIZE_MAX, &d->vocab,
			       &d->vocab_n, err);
	if (rc <= 0)
		return rc;
	if (d->vocab_n < 1 || d->vocab_n > 256)
		return tlv_bad(err, meta, "vocab", "has %zu elements, expected 1..256",
			       d->vocab_n);
	for (size_t k = 0, prev = 0; k < d->vocab_n; k++) {
		uint32_t b;
		memcpy(&b, (const uint8_t *)d->vocab + 4 * k, 4);
		if (b > 255 || (k && b <= prev))
			return tlv_bad(err, meta, "vocab",
				       "element %zu = %u: expected bytes in increasing order", k, b);
		prev = b;
	}
	return 0;
}

/* whether the checkpoint's vocabulary (none for images) is the data set's */
int
ckpt_same_vocab(const ckpt_doc *d, const dataset_pair *data)
{
	if ((size_t)data->vocab_n != (d->vocab ? d->vocab_n : 0))
		return 0;
	for (size_t k = 0; k < d->vocab_n && d->vocab; k++) {
		uint32_t b;
		memcpy(&b, (const uint8_t *)d->vocab + 4 * k, 4);
		if (b != data->vocab[k])
			return 0;
	}
	return 1;
}

/* f32 array `name` of n floats: 1 and *p, 0 when absent and optional */
static int
get_f32(const tlv_sec *s, const char *name, int req, size_t n, const void **p, char *err)
{
	*p = NULL;
	return tlv_get_array(s, name, req, TLV_F32S, n, p, NULL, err);
}

static int
read_workers(const tlv_sec *root, ckpt_doc *d, char *err)
{
	tlv_sec list, it;
	int rc = open_list(root, "workers", REQ, CFG_MAX_WORKERS, sizeof(*d->w), &list,
			   (void **)&d->w, err);
	if (rc < 0)
		return rc;
	size_t off = 0;
	int i = 0;
	while (tlv_item(&list, &off, &i, &it)) {
		ckpt_worker *cw = &d->w[d->n_w++];
		worker *w = &cw->w;
		if ((rc = ckpt_get_fields(&it, &ckpt_worker_tab, w, err)) < 0)
			return rc;
		if (w->rw.id != i - 1)
			return tlv_bad(err, &it, "id", "= %d, expected %d", w->rw.id, i - 1);
		if (w->idx_cap < 1 || w->idx_cap > CKPT_MAX_BATCH)
			return tlv_bad(err, &it, "batch_cap", "= %d is out of range 1..%d",
				       w->idx_cap, CKPT_MAX_BATCH);
		if (w->n_held < 0 || w->n_held > HELD_MAX)
			return tlv_bad(err, &it, "n_held", "= %d is out of range", w->n_held);
		if (w->rw.grad_off >= d->n_params)
			return tlv_bad(err, &it, "grad_off", "is past the model's end");
		size_t nb;
		if ((rc = tlv_get_array(&it, "batch", REQ, TLV_U32S, SIZE_MAX, &cw->batch, &nb,
					err)) < 0)
			return rc;
		if (nb > (size_t)w->idx_cap)
			return tlv_bad(err, &it, "batch", "has %zu samples, more than batch_cap",
				       nb);
		w->rw.batch_n = (int)nb;
		if ((rc = check_samples(&it, "batch", cw->batch, nb, d->n_train, err)) < 0)
			return rc;
		if ((rc = get_f32(&it, "params", REQ, d->n_params, &cw->params, err)) < 0 ||
		    (rc = get_f32(&it, "grads", REQ, d->n_params, &cw->grads, err)) < 0 ||
		    (rc = get_f32(&it, "local_ms", OPT, d->n_params, &cw->ms, err)) < 0 ||
		    (rc = get_f32(&it, "local_prev", OPT, d->n_params, &cw->wprev, err)) < 0 ||
		    (rc = get_f32(&it, "ef_residual", OPT, d->n_params, &cw->ef, err)) < 0 ||
		    (rc = get_f32(&it, "demo_delta", OPT, d->n_params, &cw->delta, err)) < 0 ||
		    (rc = get_f32(&it, "local_opt_m", OPT, d->n_params, &cw->opt_m, err)) < 0 ||
		    (rc = get_f32(&it, "local_opt_v", OPT, d->n_params, &cw->opt_v, err)) < 0 ||
		    (rc = tlv_get_array(&it, "local_opt_steps", OPT, TLV_U64S, SIZE_MAX,
					&cw->opt_steps, &cw->n_opt_steps, err)) < 0)
			return rc;
	}
	return 0;
}

static int
read_held(const tlv_sec *root, ckpt_doc *d, char *err)
{
	tlv_sec list, it;
	int rc = open_list(root, "held", REQ, MAX_HELD, sizeof(*d->held), &list,
			   (void **)&d->held, err);
	if (rc < 0)
		return rc;
	size_t off = 0;
	int i = 0;
	while (tlv_item(&list, &off, &i, &it)) {
		ckpt_held *ch = &d->held[d->n_held++];
		if ((rc = ckpt_get_fields(&it, &ckpt_held_tab, &ch->h, err)) < 0)
			return rc;
		if (ch->h.worker < 0 || ch->h.worker >= d->n_w)
			return tlv_bad(err, &it, "worker", "= %d names no worker", ch->h.worker);
		if (ch->h.off >= d->n_params)
			return tlv_bad(err, &it, "off", "is past the model's end");
		if ((rc = get_f32(&it, "grad", REQ, d->n_params - ch->h.off, &ch->grad,
				  err)) < 0 ||
		    (rc = get_f32(&it, "backup", OPT, d->n_params, &ch->bak, err)) < 0)
			return rc;
	}
	return 0;
}

static int
read_vhist(const tlv_sec *root, ckpt_doc *d, char *err)
{
	tlv_sec list, it;
	int rc = open_list(root, "version_history", REQ, VHIST_MAX, 0, &list, NULL, err);
	if (rc < 0)
		return rc;
	size_t off = 0;
	int i = 0;
	while (tlv_item(&list, &off, &i, &it)) {
		if ((rc = tlv_get_u64(&it, "v", REQ, &d->vh_v[d->n_vh], err)) < 0 ||
		    (rc = get_f32(&it, "weights", OPT, d->n_params, &d->vh[d->n_vh], err)) < 0)
			return rc;
		d->n_vh++;
	}
	return 0;
}

/* the rule by name; the same as the run object's */
static int
read_rule(const tlv_sec *rs, ckpt_doc *d, char *err)
{
	char name[64];
	int rc = tlv_get_str(rs, "rule", REQ, name, sizeof(name), err);
	if (rc < 0)
		return rc;
	if (!(d->rule = rule_find(name)))
		return tlv_bad(err, rs, "rule", "= \"%s\" is unknown", name);
	if (strcmp(name, d->cfg.rule))
		return tlv_bad(err, rs, "rule", "= \"%s\", the run object's is \"%s\"", name,
			       d->cfg.rule);
	return 0;
}

/* Read and check everything; nothing of a run is touched. */
int
ckpt_read_doc(const uint8_t *buf, size_t len, int skip_crc, ckpt_doc *d, char *err)
{
	tlv_sec root, meta, rs;
	memset(d, 0, sizeof(*d));
	int rc = open_file(buf, len, skip_crc, &root, err);
	if (rc < 0)
		return rc;
	if ((rc = tlv_get_sec(&root, "meta", REQ, TLV_SEC, &meta, err)) < 0 ||
	    (rc = tlv_get_u64(&meta, "n_params", REQ, &d->n_params, err)) < 0 ||
	    (rc = tlv_get_u64(&meta, "n_train", REQ, &d->n_train, err)) < 0)
		return rc;
	if (!d->n_params || d->n_params > ((uint64_t)1 << 34) || !d->n_train ||
	    d->n_train > UINT32_MAX)
		return tlv_bad(err, &meta, "n_params", "or n_train is out of range");
	if ((rc = read_vocab(&meta, d, err)) < 0 || (rc = read_config(&root, &d->cfg, err)) < 0)
		return rc;

	if (!(d->sh = calloc(1, sizeof(run))))
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	run *sh = d->sh;
	if ((rc = tlv_get_sec(&root, "run", REQ, TLV_SEC, &rs, err)) < 0 ||
	    (rc = read_rule(&rs, d, err)) < 0 ||
	    (rc = ckpt_get_fields(&rs, &ckpt_run_tab, sh, err)) < 0 ||
	    (rc = tlv_get_f64(&rs, "wall_s", OPT, &d->wall_s, err)) < 0)
		return rc;
	if (sh->pos > d->n_train)
		return tlv_bad(err, &rs, "pos", "is past the training set's end");
	if (sh->loss_n < 0)
		return tlv_bad(err, &rs, "loss_n", "is negative");
	size_t wn = 0, wt = 0;
	if ((rc = tlv_get_array(&rs, "window_tau", OPT, TLV_U64S, SIZE_MAX, &d->win_tau,
				&wn, err)) < 0 ||
	    (rc = tlv_get_array(&rs, "window_t", OPT, TLV_F64S, wn, &d->win_t, &wt,
				err)) < 0)
		return rc;
	if (wn && !d->win_t)
		return sl_fail(err, SL_EFORMAT, "checkpoint: missing \"run.window_t\"");
	d->win_n = wn;
	if ((rc = tlv_get_array(&rs, "perm", REQ, TLV_U32S, d->n_train, &d->perm, NULL,
				err)) < 0)
		return rc;
	if ((rc = check_samples(&rs, "perm", d->perm, d->n_train, d->n_train, err)) < 0)
		return rc;

	if ((rc = read_list(&root, "series", OPT, &ckpt_eval_tab, sizeof(run_eval), MAX_SERIES,
			    (void **)&d->series, &d->n_series, err)) < 0 ||
	    (rc = read_list(&root, "events", REQ, &ckpt_event_tab, sizeof(vevent), MAX_EVENTS,
			    (void **)&d->ev, &d->n_ev, err)) < 0 ||
	    (rc = read_list(&root, "schedule", REQ, &ckpt_sched_tab, sizeof(run_sched),
			    MAX_SCHED, (void **)&d->sched, &d->n_sched, err)) < 0)
		return rc;
	if (sh->sched_pos < 0 || sh->sched_pos > d->n_sched)
		return tlv_bad(err, &rs, "sched_pos", "= %d is past the schedule's %d entries",
			       sh->sched_pos, d->n_sched);
	if ((rc = read_vhist(&root, d, err)) < 0 || (rc = read_workers(&root, d, err)) < 0 ||
	    (rc = read_held(&root, d, err)) < 0)
		return rc;
	for (int i = 0; i < d->n_ev; i++)
		if (d->ev[i].worker < 0 || d->ev[i].worker >= d->n_w)
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint: \"events[%d].worker\" = %d names no worker", i,
				       d->ev[i].worker);
	for (int i = 0; i < d->n_sched; i++) {
		/* what the run indexes or sizes by (the rest is checked when
		 * it applies) */
		const run_cmd *c = &d->sched[i].cmd;
		const char *bad = c->worker >= CFG_MAX_WORKERS ? "worker"
			: (c->fields & CMD_WORKERS) && (c->workers < 1 ||
							c->workers > CFG_MAX_WORKERS) ? "workers"
			: (c->fields & CMD_BATCH) && c->batch < 1 ? "batch"
			: NULL;
		if (bad)
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint: \"schedule[%d].change.%s\" is out of range", i,
				       bad);
	}
	if ((rc = tlv_get_sec(&root, "server", REQ, TLV_SEC, &d->server, err)) < 0 ||
	    (rc = ps_restore(NULL, &d->server, d->n_params, err)) < 0 ||
	    (rc = ckpt_get_ledger(&root, &d->led, err)) < 0)
		return rc;
	return 0;
}

int
run_checkpoint_config(const uint8_t *buf, size_t len, run_config *cfg, char *err)
{
	tlv_sec root;
	int rc = open_file(buf, len, 0, &root, err);
	return rc < 0 ? rc : read_config(&root, cfg, err);
}

int
run_checkpoint_version(const uint8_t *buf, size_t len, uint64_t *v, char *err)
{
	tlv_sec root, meta;
	int rc = open_file(buf, len, 0, &root, err);
	if (rc < 0 || (rc = tlv_get_sec(&root, "meta", REQ, TLV_SEC, &meta, err)) < 0 ||
	    (rc = tlv_get_u64(&meta, "v", REQ, v, err)) < 0)
		return rc;
	return 0;
}

int
run_checkpoint_vocab(const uint8_t *buf, size_t len, uint8_t vocab[256], int *n, char *err)
{
	ckpt_doc d;
	int rc = ckpt_read_doc(buf, len, 0, &d, err);
	*n = 0;
	for (size_t k = 0; rc == 0 && d.vocab && k < d.vocab_n; k++) {
		uint32_t b;
		memcpy(&b, (const uint8_t *)d.vocab + 4 * k, 4);
		vocab[k] = (uint8_t)b;
		*n = (int)k + 1;
	}
	ckpt_doc_free(&d);
	return rc < 0 ? rc : 0;
}

int
run_checkpoint_weights(const uint8_t *buf, size_t len, float **w, size_t *n, char *err)
{
	ckpt_doc d;
	const void *p = NULL;
	*w = NULL;
	*n = 0;
	int rc = ckpt_read_doc(buf, len, 0, &d, err);
	if (rc == 0)
		rc = get_f32(&d.server, "weights", REQ, d.n_params, &p, err);
	if (rc >= 0 && p) {
		*w = malloc(sizeof(float) * d.n_params);
		if (!*w)
			rc = sl_fail(err, SL_ENOMEM, "checkpoint: out of memory for %llu weights",
				     (unsigned long long)d.n_params);
		else {
			memcpy(*w, p, sizeof(float) * d.n_params);
			*n = d.n_params;
		}
	}
	ckpt_doc_free(&d);
	return rc < 0 ? rc : 0;
}

int
run_checkpoint_check(const uint8_t *buf, size_t len, int skip_crc, char *err)
{
	ckpt_doc d;
	int rc = ckpt_read_doc(buf, len, skip_crc, &d, err);
	ckpt_doc_free(&d);
	return rc < 0 ? rc : 0;
}
