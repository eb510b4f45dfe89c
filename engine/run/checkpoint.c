/* checkpoint.c - the whole run serialised at a quiet point and loaded
 * back (exact on the virtual clock), as tagged fields (engine/base/tlv.h;
 * docs/formats.md): every field by name, the rule and other enums by
 * name, buffers with their length. The structs' fields are rows of the
 * tables in ckpt_fields.c; a field added later is one row there, optional
 * on load, so every older file still loads.
 *
 * This file saves a run and loads a checked file into it: loading reads
 * and checks the whole file first (ckpt_read.c's ckpt_read_doc: touches
 * no run; the pure run_checkpoint_check is the fuzz target) before
 * anything of the run is changed (load_doc). */
#include "ckpt_doc.h"
#include "optim.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		if (wk->ef_res) /* error feedback's residual (host memory) */
			tlv_array(&w, "ef_residual", TLV_F32S, wk->ef_res, r->n_params);
		if (wk->rw.delta) /* demo's momentum (host memory) */
			tlv_array(&w, "demo_delta", TLV_F32S, wk->rw.delta, r->n_params);
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

/* ---- restoring --------------------------------------------------------- */

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

/* error feedback's residual, as saved (none saved: zero) */
static int
load_residual(run *r, worker *w, const ckpt_worker *cw, char *err)
{
	free(w->ef_res);
	w->ef_res = NULL;
	if (!cw->ef)
		return 0;
	if (!(w->ef_res = malloc(sizeof(float) * r->n_params)))
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	memcpy(w->ef_res, cw->ef, sizeof(float) * r->n_params);
	return 0;
}

/* demo's momentum, as saved (none saved: zero) */
static int
load_delta(run *r, worker *w, const ckpt_worker *cw, char *err)
{
	free(w->rw.delta);
	w->rw.delta = NULL;
	if (!cw->delta)
		return 0;
	if (!(w->rw.delta = malloc(sizeof(float) * r->n_params)))
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	memcpy(w->rw.delta, cw->delta, sizeof(float) * r->n_params);
	return 0;
}

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
	int rc0 = split_run_restore(r, err);
	if (rc0 < 0)
		return rc0;
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
		if ((rc = split_restore_worker(r, w, w->sp_pos, w->sp_n, err)) < 0)
			return rc;
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
		if ((rc = load_residual(r, w, cw, err)) < 0 || (rc = load_delta(r, w, cw, err)) < 0)
			return rc;
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
	int rc = ckpt_read_doc(buf, len, 0, &d, err);
	if (rc == 0 && (d.n_params != r->n_params || d.n_train != r->data->train.n))
		rc = sl_fail(err, SL_EFORMAT,
			     "checkpoint: model or training set differ from the run's "
			     "(%llu parameters and %llu samples, the run has %zu and %u)",
			     (unsigned long long)d.n_params, (unsigned long long)d.n_train,
			     r->n_params, r->data->train.n);
	if (rc == 0 && !ckpt_same_vocab(&d, r->data))
		rc = sl_fail(err, SL_EFORMAT,
			     "checkpoint: its text's vocabulary (%zu bytes) is not the run's data "
			     "set's (%d bytes, %s): the text changed",
			     d.vocab ? d.vocab_n : 0, r->data->vocab_n, r->data->name);
	if (rc == 0)
		rc = load_doc(r, &d, err);
	ckpt_doc_free(&d);
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
