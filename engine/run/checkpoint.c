/* checkpoint.c - the whole run serialised at a quiet point and loaded
 * back (exact on the virtual clock), as tagged fields (engine/base/tlv.h;
 * docs/formats.md): every field by name, the rule and other enums by
 * name, buffers with their length. The structs' fields are rows of the
 * tables in ckpt_fields.c; a field added later is one row there, optional
 * on load, so every older file still loads.
 *
 * Loading reads and checks the whole file (read_doc: touches no run; the
 * pure run_checkpoint_check is the fuzz target) before anything of the
 * run is changed (load_doc). */
#include "ckpt_fields.h"
#include "optim.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* format 2: tagged fields (format 1 was the raw struct dump) */
#define CKPT_FORMAT 2
#define CKPT_MIN_READER 2

#define MAX_SERIES (1 << 24)
#define MAX_EVENTS (1 << 24)
#define MAX_SCHED (1 << 20)
#define MAX_HELD (1 << 20)
#define CKPT_MAX_BATCH 65536

/* ---- saving ------------------------------------------------------------- */

/* n floats of backend memory as a field (absent when src is NULL) */
static void
put_floats(tlv_w *w, const char *name, backend *be, const float *src, size_t n)
{
	if (!src)
		return;
	void *dst = tlv_reserve(w, name, TLV_F32S, sizeof(float) * n);
	if (dst)
		be->ops->download(be, dst, src, sizeof(float) * n);
}

static void
put_list(tlv_w *w, const char *name, const ftable *t, const void *items, size_t size,
	 int n)
{
	tlv_open(w, name, TLV_LIST);
	for (int i = 0; i < n; i++) {
		tlv_open(w, "", TLV_SEC);
		ckpt_put_fields(w, t, (const uint8_t *)items + size * (size_t)i);
		tlv_close(w);
	}
	tlv_close(w);
}

/* the run's whole state (lock held, between steps) */
void
ckpt_save_state(run *r, blob *b)
{
	tlv_w w;
	tlv_begin(&w, b, CKPT_FORMAT, CKPT_MIN_READER);

	tlv_open(&w, "meta", TLV_SEC);
	tlv_str(&w, "writer", "stalelab " SL_VERSION);
	tlv_u64(&w, "n_params", r->n_params);
	tlv_u64(&w, "n_train", r->data->train.n);
	if (r->data->vocab_n > 0) { /* text: the bytes the token ids stand for */
		uint32_t vocab[256];
		for (int i = 0; i < r->data->vocab_n; i++)
			vocab[i] = r->data->vocab[i];
		tlv_array(&w, "vocab", TLV_U32S, vocab, (size_t)r->data->vocab_n);
	}
	tlv_u64(&w, "v", ps_version(r->ps));
	tlv_f64(&w, "t", run_now(r));
	tlv_close(&w);

	tlv_open(&w, "config", TLV_SEC);
	ckpt_put_fields(&w, &ckpt_config_tab, &r->cfg);
	put_list(&w, "worker_overrides", &ckpt_override_tab, r->cfg.overrides,
		 sizeof(worker_override), r->cfg.n_overrides);
	tlv_close(&w);

	tlv_open(&w, "run", TLV_SEC);
	tlv_str(&w, "rule", r->rule->name);
	ckpt_put_fields(&w, &ckpt_run_tab, r);
	tlv_f64(&w, "wall_s", run_wall(r));
	/* the sliding window, oldest first */
	uint64_t tau[WINDOW_N];
	double t[WINDOW_N];
	for (int i = 0; i < r->win_n; i++) {
		int k = (r->win_pos - r->win_n + i + WINDOW_N) % WINDOW_N;
		tau[i] = r->win_tau[k];
		t[i] = r->win_t[k];
	}
	tlv_array(&w, "window_tau", TLV_U64S, tau, (size_t)r->win_n);
	tlv_array(&w, "window_t", TLV_F64S, t, (size_t)r->win_n);
	tlv_array(&w, "perm", TLV_U32S, r->perm, r->data->train.n);
	tlv_close(&w);

	put_list(&w, "series", &ckpt_eval_tab, r->series, sizeof(run_eval), r->n_series);
	put_list(&w, "events", &ckpt_event_tab, r->ev, sizeof(vevent), r->n_ev);
	put_list(&w, "schedule", &ckpt_sched_tab, r->sched, sizeof(run_sched), r->n_sched);

	tlv_open(&w, "version_history", TLV_LIST);
	for (int i = 0; i < r->vh_depth; i++) {
		tlv_open(&w, "", TLV_SEC);
		tlv_u64(&w, "v", r->vh_v[i]);
		put_floats(&w, "weights", r->be_ps, r->vh[i], r->n_params);
		tlv_close(&w);
	}
	tlv_close(&w);

	tlv_open(&w, "server", TLV_SEC);
	ps_save(r->ps, &w);
	tlv_close(&w);

	tlv_open(&w, "held", TLV_LIST);
	for (int i = 0; i < r->n_held; i++) {
		const held *h = &r->held[i];
		tlv_open(&w, "", TLV_SEC);
		ckpt_put_fields(&w, &ckpt_held_tab, h);
		tlv_array(&w, "grad", TLV_F32S, h->g + h->off, r->n_params - h->off);
		if (h->bak)
			tlv_array(&w, "backup", TLV_F32S, h->bak, r->n_params);
		tlv_close(&w);
	}
	tlv_close(&w);

	tlv_open(&w, "workers", TLV_LIST);
	for (int i = 0; i < r->n_slots; i++) {
		worker *wk = r->w[i];
		tlv_open(&w, "", TLV_SEC);
		ckpt_put_fields(&w, &ckpt_worker_tab, wk);
		tlv_array(&w, "batch", TLV_U32S, wk->idx, (size_t)wk->rw.batch_n);
		put_floats(&w, "params", wk->rw.be, wk->rw.m->params, r->n_params);
		put_floats(&w, "grads", wk->rw.be, wk->rw.m->grads, r->n_params);
		put_floats(&w, "local_ms", wk->rw.be, wk->rw.ms, r->n_params);
		put_floats(&w, "local_prev", wk->rw.be, wk->rw.wprev, r->n_params);
		if (wk->rw.opt) { /* localsgd, easgd: the worker's own optimiser */
			put_floats(&w, "local_opt_m", wk->rw.be, wk->rw.opt->m, r->n_params);
			put_floats(&w, "local_opt_v", wk->rw.be, wk->rw.opt->v, r->n_params);
			tlv_array(&w, "local_opt_steps", TLV_U64S, wk->rw.opt->steps,
				  (size_t)wk->rw.opt->n_layers);
		}
		tlv_close(&w);
	}
	tlv_close(&w);
	ckpt_put_ledger(&w, r->led);
	tlv_end(&w);
}

/* ---- loading ------------------------------------------------------------ */

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

/* n floats from the file into backend memory (allocated when *dst is
 * NULL) */
static int
load_floats(backend *be, float **dst, const void *src, size_t n, char *err)
{
	if (!*dst && !(*dst = be->ops->alloc(be, sizeof(float) * n)))
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	be->ops->upload(be, *dst, src, sizeof(float) * n);
	return 0;
}

/* What a checkpoint holds, read and checked before anything is loaded. */
typedef struct ckpt_held {
	held h;
	const void *grad, *bak;
} ckpt_held;

typedef struct ckpt_worker {
	worker w;
	const void *batch, *params, *grads, *ms, *wprev;
	const void *opt_m, *opt_v, *opt_steps; /* the worker's optimiser (optional) */
	size_t n_opt_steps;
} ckpt_worker;

/* a localsgd or easgd worker's own optimiser state, as the run's optimiser
 * has it (so its next step goes on, no reset) */
static int
load_worker_optim(run *r, worker *w, const ckpt_worker *cw, char *err)
{
	int nl;
	const ps_layer *layers = ps_layers(r->ps, &nl);
	if (cw->opt_steps && cw->n_opt_steps != (size_t)nl)
		return sl_fail(err, SL_EFORMAT, "checkpoint: \"workers[%d].local_opt_steps\" has "
			       "%zu layers, the model %d", w->rw.id, cw->n_opt_steps, nl);
	if (!w->rw.opt && (w->rw.opt = calloc(1, sizeof(*w->rw.opt))) &&
	    optim_init(w->rw.opt, w->rw.be, r->n_params, layers, nl) < 0) {
		free(w->rw.opt);
		w->rw.opt = NULL;
	}
	if (!w->rw.opt)
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	w->rw.opt->kind = r->cfg.opt.kind;
	if ((cw->opt_m && load_floats(w->rw.be, &w->rw.opt->m, cw->opt_m, r->n_params, err) < 0) ||
	    (cw->opt_v && load_floats(w->rw.be, &w->rw.opt->v, cw->opt_v, r->n_params, err) < 0))
		return -SL_ENOMEM;
	if (cw->opt_steps)
		memcpy(w->rw.opt->steps, cw->opt_steps, sizeof(uint64_t) * (size_t)nl);
	return 0;
}

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

static void
doc_free(ckpt_doc *d)
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
static int
same_vocab(const ckpt_doc *d, const dataset_pair *data)
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
static int
read_doc(const uint8_t *buf, size_t len, int skip_crc, ckpt_doc *d, char *err)
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
	int rc = read_doc(buf, len, 0, &d, err);
	*n = 0;
	for (size_t k = 0; rc == 0 && d.vocab && k < d.vocab_n; k++) {
		uint32_t b;
		memcpy(&b, (const uint8_t *)d.vocab + 4 * k, 4);
		vocab[k] = (uint8_t)b;
		*n = (int)k + 1;
	}
	doc_free(&d);
	return rc < 0 ? rc : 0;
}

int
run_checkpoint_weights(const uint8_t *buf, size_t len, float **w, size_t *n, char *err)
{
	ckpt_doc d;
	const void *p = NULL;
	*w = NULL;
	*n = 0;
	int rc = read_doc(buf, len, 0, &d, err);
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
	doc_free(&d);
	return rc < 0 ? rc : 0;
}

int
run_checkpoint_check(const uint8_t *buf, size_t len, int skip_crc, char *err)
{
	ckpt_doc d;
	int rc = read_doc(buf, len, skip_crc, &d, err);
	doc_free(&d);
	return rc < 0 ? rc : 0;
}

/* the checked document into the run (fails only when out of memory) */
static int
load_doc(run *r, ckpt_doc *d, char *err)
{
	run *sh = d->sh;
	/* the stop is the one run_new() was given, so a resumed run may
	 * stop elsewhere than the checkpointed one would have */
	run_config keep = r->cfg;
	r->cfg = d->cfg;
	r->cfg.stop_epochs = keep.stop_epochs;
	r->cfg.stop_steps = keep.stop_steps;
	r->cfg.stop_seconds = keep.stop_seconds;
	r->cfg.stop_target_acc = keep.stop_target_acc;
	ckpt_copy_fields(&ckpt_run_tab, r, sh);
	r->take_limit = keep.stop_epochs > 0
			? (uint64_t)ceil(keep.stop_epochs * r->data->train.n - 0.5) : 0;
	r->rule = d->rule;
	r->t_base = d->wall_s;
	size_t skip = d->win_n > WINDOW_N ? d->win_n - WINDOW_N : 0;
	r->win_n = (int)(d->win_n - skip);
	r->win_pos = r->win_n % WINDOW_N;
	if (r->win_n) {
		memcpy(r->win_tau, (const uint64_t *)d->win_tau + skip,
		       sizeof(uint64_t) * (size_t)r->win_n);
		memcpy(r->win_t, (const double *)d->win_t + skip,
		       sizeof(double) * (size_t)r->win_n);
	}
	memcpy(r->perm, d->perm, sizeof(uint32_t) * r->data->train.n);
	if (d->n_series) {
		for (int i = 0; i < d->n_series; i++) {
			d->series[i].stop_reason = NULL;
			/* not a field: the run's data says it (a text set) */
			d->series[i].lm = r->data->vocab_n > 0;
		}
		free(r->series);
		r->series = d->series;
		r->n_series = r->cap_series = d->n_series;
		d->series = NULL;
	}
	free(r->ev);
	r->ev = d->ev;
	r->n_ev = r->cap_ev = d->n_ev;
	d->ev = NULL;
	free(r->sched);
	r->sched = d->sched;
	r->n_sched = d->n_sched;
	d->sched = NULL;

	for (int i = r->vh_depth; i < d->n_vh; i++)
		r->vh[i] = NULL;
	for (int i = 0; i < d->n_vh; i++) {
		r->vh_v[i] = d->vh_v[i];
		if (d->vh[i] && load_floats(r->be_ps, &r->vh[i], d->vh[i], r->n_params, err) < 0)
			return -SL_ENOMEM;
	}
	if (d->n_vh > r->vh_depth)
		r->vh_depth = d->n_vh;

	/* the saved optimiser first, so its state is not zeroed after */
	ps_set_opt(r->ps, (float)r->cfg.lr, (float)r->cfg.momentum,
		   (float)r->cfg.weight_decay);
	if (ps_set_optim(r->ps, &r->cfg.opt) < 0)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	int rc = ps_restore(r->ps, &d->server, r->n_params, err);
	if (rc < 0)
		return rc;
	if (d->led) { /* a new daemon: no number the saving one issued comes again */
		free(r->led);
		r->led = d->led;
		d->led = NULL;
		ledger_restored(r->led);
	}
	ps_set_opt(r->ps, (float)r->cfg.lr, (float)r->cfg.momentum,
		   (float)r->cfg.weight_decay);

	for (int i = 0; i < d->n_held; i++) {
		ckpt_held *ch = &d->held[i];
		held h = ch->h;
		h.g = malloc(sizeof(float) * r->n_params);
		h.bak = ch->bak ? malloc(sizeof(float) * r->n_params) : NULL;
		if (r->n_held == r->cap_held) {
			int cap = r->cap_held ? 2 * r->cap_held : 16;
			held *nh = realloc(r->held, sizeof(held) * (size_t)cap);
			if (nh) {
				r->held = nh;
				r->cap_held = cap;
			}
		}
		if (!h.g || (ch->bak && !h.bak) || r->n_held == r->cap_held) {
			free(h.g);
			free(h.bak);
			return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
		}
		memset(h.g, 0, sizeof(float) * h.off);
		memcpy(h.g + h.off, ch->grad, sizeof(float) * (r->n_params - h.off));
		if (h.bak)
			memcpy(h.bak, ch->bak, sizeof(float) * r->n_params);
		r->held[r->n_held++] = h;
	}

	for (int i = 0; i < d->n_w; i++) {
		ckpt_worker *cw = &d->w[i];
		if (i >= r->n_slots) {
			/* its model and batch buffer as large as the saved
			 * worker's (made before the run's batch changed), so
			 * the next batches are the same */
			int batch = r->cfg.batch;
			r->cfg.batch = cw->w.idx_cap;
			worker *nw;
			int rc2 = worker_new(r, i, &nw);
			r->cfg.batch = batch;
			if (rc2 < 0)
				return sl_fail(err, rc2 == -SL_ENOMEM ? SL_ENOMEM : SL_EFORMAT,
					       "checkpoint: %s", r->err);
			r->w[i] = nw;
			r->n_slots = i + 1;
		}
		worker *w = r->w[i];
		if (w->rw.m->batch_cap < cw->w.idx_cap)
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint: \"workers[%d].batch_cap\" = %d, the run's "
				       "worker holds %d", i, cw->w.idx_cap, w->rw.m->batch_cap);
		ckpt_copy_fields(&ckpt_worker_tab, w, &cw->w);
		if (w->remote_slot) { /* its remote worker joins again, or another */
			w->active = 0;
			w->remote = NULL;
			w->remote_left = 1;
		}
		w->rw.batch_n = cw->w.rw.batch_n;
		memcpy(w->idx, cw->batch, sizeof(uint32_t) * (size_t)w->rw.batch_n);
		backend *be = w->rw.be;
		if (load_floats(be, &w->rw.m->params, cw->params, r->n_params, err) < 0 ||
		    load_floats(be, &w->rw.m->grads, cw->grads, r->n_params, err) < 0 ||
		    (cw->ms && load_floats(be, &w->rw.ms, cw->ms, r->n_params, err) < 0) ||
		    (cw->wprev && load_floats(be, &w->rw.wprev, cw->wprev, r->n_params, err) < 0))
			return -SL_ENOMEM;
		if ((cw->opt_m || cw->opt_v || cw->opt_steps) &&
		    (rc = load_worker_optim(r, w, cw, err)) < 0)
			return rc;
		if (w->rw.ms && !w->rw.tmp &&
		    !(w->rw.tmp = be->ops->alloc(be, sizeof(float) * r->n_params)))
			return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
		if (!r->virt) {
			/* threads start afresh: what was in flight is dropped */
			if (w->st != W_WAIT_BEGIN)
				w->st = W_IDLE;
			w->pending = 0;
		}
	}
	return 0;
}

static int
restore_state(run *r, const uint8_t *buf, size_t len, char *err)
{
	ckpt_doc d;
	int rc = read_doc(buf, len, 0, &d, err);
	if (rc == 0 && (d.n_params != r->n_params || d.n_train != r->data->train.n))
		rc = sl_fail(err, SL_EFORMAT,
			     "checkpoint: model or training set differ from the run's "
			     "(%llu parameters and %llu samples, the run has %zu and %u)",
			     (unsigned long long)d.n_params, (unsigned long long)d.n_train,
			     r->n_params, r->data->train.n);
	if (rc == 0 && !same_vocab(&d, r->data))
		rc = sl_fail(err, SL_EFORMAT,
			     "checkpoint: its text's vocabulary (%zu bytes) is not the run's data "
			     "set's (%d bytes, %s): the text changed",
			     d.vocab ? d.vocab_n : 0, r->data->vocab_n, r->data->name);
	if (rc == 0)
		rc = load_doc(r, &d, err);
	doc_free(&d);
	return rc;
}

int
run_restore(run *r, const uint8_t *buf, size_t len, char *err)
{
	run_lock(r);
	int rc = r->exec_live ? sl_fail(err, SL_ESTATE, "resume: the run has started")
			      : restore_state(r, buf, len, err);
	if (rc == 0) {
		r->restored = 1;
		report_publish(r);
	}
	run_unlock(r);
	return rc;
}

/* ---- taking a checkpoint of a live run ----------------------------------- */

int
run_checkpoint(run *r, uint8_t **buf, size_t *len, char *err)
{
	*buf = NULL;
	*len = 0;
	/* the loop lets us in at its next yield point (run_lock), then
	 * takes the checkpoint at its next quiet point (ckpt_serve) */
	run_lock(r);
	if (r->exec_live && r->state != RUN_FINISHED) {
		/* the loop takes it at its next quiet point */
		while (r->ckpt_req)
			pthread_cond_wait(&r->cv, &r->mu);
		r->ckpt_req = 1;
		pthread_cond_broadcast(&r->cv);
		while (r->ckpt_req == 1 && r->exec_live)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->ckpt_req == 1) { /* the loop ended first */
			r->ckpt_req = 0;
			ckpt_save_state(r, &r->ckpt);
		}
	} else {
		ckpt_save_state(r, &r->ckpt);
	}
	r->ckpt_req = 0;
	blob b = r->ckpt;
	memset(&r->ckpt, 0, sizeof(r->ckpt));
	run_unlock(r);
	if (b.oom) {
		blob_free(&b);
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	}
	*buf = b.p;
	*len = b.n;
	return 0;
}

/* the loop's side of run_checkpoint (lock held, at a quiet point) */
void
ckpt_serve(run *r)
{
	/* a caller on its way to the lock gets it first: its request is in
	 * when this returns */
	run_yield(r);
	if (r->ckpt_req != 1)
		return;
	if (!r->virt) {
		/* no compute in flight: gate new steps like an evaluation */
		int gate = r->eval_gate;
		r->eval_gate = 1;
		while (r->n_computing > 0)
			pthread_cond_wait(&r->cv, &r->mu);
		ckpt_save_state(r, &r->ckpt);
		r->eval_gate = gate;
	} else {
		ckpt_save_state(r, &r->ckpt);
	}
	r->ckpt_req = 2;
	pthread_cond_broadcast(&r->cv);
}
