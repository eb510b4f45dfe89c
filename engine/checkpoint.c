/* checkpoint.c - the whole run serialised at a quiet point and loaded
 * back (exact on the virtual clock). */
#include "run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checkpoints ---------------------------------------------------------- */

#define CKPT_MAGIC "SLCKPT01"

static void
put_floats(blob *b, backend *be, const float *src, size_t n)
{
	blob_u64(b, src != NULL);
	if (!src)
		return;
	float *h = malloc(sizeof(float) * n);
	if (!h) {
		b->oom = 1;
		return;
	}
	be->ops->download(be, h, src, sizeof(float) * n);
	blob_put(b, h, sizeof(float) * n);
	free(h);
}

static int
get_floats(cursor *c, backend *be, float **dst, size_t n)
{
	uint64_t present = cur_u64(c);
	if (present > 1)
		return -1;
	if (!present)
		return 0;
	const void *src = cur_view(c, sizeof(float) * n);
	if (!src)
		return -1;
	if (!*dst && !(*dst = be->ops->alloc(be, sizeof(float) * n)))
		return -1;
	be->ops->upload(be, *dst, src, sizeof(float) * n);
	return 0;
}

/* the run's whole state (lock held, between steps) */
void
ckpt_save_state(run *r, blob *b)
{
	blob_put(b, CKPT_MAGIC, 8);
	blob_u64(b, sizeof(run_config));
	blob_u64(b, r->n_params);
	blob_u64(b, r->data->train.n);
	blob_put(b, &r->cfg, sizeof(run_config));
	uint64_t u[] = {r->samples, r->updates, (uint64_t)r->loss_n, r->taken,
			r->take_limit, r->pos, r->shuffles, r->next_eval_v,
			r->epochs_done, r->clock_gap_max, (uint64_t)r->sched_pos,
			r->ev_seq, (uint64_t)rule_index(r->rule), (uint64_t)r->n_slots,
			(uint64_t)r->win_pos, (uint64_t)r->win_n, (uint64_t)r->paused,
			(uint64_t)r->n_series, (uint64_t)r->n_ev, (uint64_t)r->n_held,
			(uint64_t)r->vh_depth};
	blob_put(b, u, sizeof(u));
	double d[] = {r->loss_sum, r->vtime, run_wall(r), r->eval_s, r->best_acc,
		      r->last_acc, r->last_test_loss, r->last_train_loss};
	blob_put(b, d, sizeof(d));
	blob_put(b, &r->shuf, sizeof(r->shuf));
	blob_put(b, &r->hist, sizeof(r->hist));
	blob_put(b, &r->age, sizeof(r->age));
	blob_put(b, r->win_tau, sizeof(r->win_tau));
	blob_put(b, r->win_t, sizeof(r->win_t));
	blob_put(b, r->perm, sizeof(uint32_t) * r->data->train.n);
	blob_put(b, r->series, sizeof(run_eval) * (size_t)r->n_series);
	blob_put(b, r->ev, sizeof(vevent) * (size_t)r->n_ev);
	blob_u64(b, (uint64_t)r->n_sched);
	blob_put(b, r->sched, sizeof(run_sched) * (size_t)r->n_sched);
	for (int i = 0; i < r->vh_depth; i++) {
		blob_u64(b, r->vh_v[i]);
		put_floats(b, r->be_ps, r->vh[i], r->n_params);
	}
	ps_save(r->ps, b);
	for (int i = 0; i < r->n_held; i++) {
		held *h = &r->held[i];
		blob_put(b, h, sizeof(*h)); /* the pointers are rewritten on load */
		blob_put(b, h->g + h->off, sizeof(float) * (r->n_params - h->off));
		if (h->bak)
			blob_put(b, h->bak, sizeof(float) * r->n_params);
	}
	for (int i = 0; i < r->n_slots; i++) {
		worker *w = r->w[i];
		blob_put(b, w, sizeof(*w)); /* pointers are rewritten on load */
		blob_put(b, w->idx, sizeof(uint32_t) * (size_t)w->idx_cap);
		put_floats(b, w->be, w->m->params, r->n_params);
		put_floats(b, w->be, w->m->grads, r->n_params);
		put_floats(b, w->be, w->ms, r->n_params);
		put_floats(b, w->be, w->wprev, r->n_params);
	}
	blob_put(b, CKPT_MAGIC, 8);
}

int
run_checkpoint_config(const uint8_t *buf, size_t len, run_config *cfg, char *err)
{
	cursor c = {buf, len, 0, 0};
	const void *magic = cur_view(&c, 8);
	if (!magic || memcmp(magic, CKPT_MAGIC, 8))
		return sl_fail(err, SL_EFORMAT, "not a stalelab checkpoint (bad magic)");
	if (cur_u64(&c) != sizeof(run_config))
		return sl_fail(err, SL_EFORMAT,
			       "checkpoint written by another stalelab build (run object size)");
	cur_u64(&c);
	cur_u64(&c);
	if (cur_get(&c, cfg, sizeof(*cfg)) < 0)
		return sl_fail(err, SL_EFORMAT, "checkpoint truncated in its run object");
	cfg->model[sizeof(cfg->model) - 1] = 0;
	cfg->dataset[sizeof(cfg->dataset) - 1] = 0;
	cfg->rule[sizeof(cfg->rule) - 1] = 0;
	cfg->clock[sizeof(cfg->clock) - 1] = 0;
	cfg->device[sizeof(cfg->device) - 1] = 0;
	cfg->rp.local_opt[sizeof(cfg->rp.local_opt) - 1] = 0;
	if (cfg->n_overrides < 0 || cfg->n_overrides > CFG_MAX_OVERRIDES)
		return sl_fail(err, SL_EFORMAT, "checkpoint: bad worker_overrides count");
	return config_validate(cfg, err) < 0 ? -SL_EFORMAT : 0;
}

static int
restore_state(run *r, cursor *c, char *err)
{
	const char *what = "header";
	run_config cfg;
	if (run_checkpoint_config(c->p, c->n, &cfg, err) < 0)
		return -SL_EFORMAT;
	cur_view(c, 8);
	cur_u64(c);
	if (cur_u64(c) != r->n_params || cur_u64(c) != r->data->train.n)
		return sl_fail(err, SL_EFORMAT,
			       "checkpoint: model or training set differ from the run's");
	cur_get(c, &cfg, sizeof(cfg));
	uint64_t u[21];
	double d[8];
	cur_get(c, u, sizeof(u));
	cur_get(c, d, sizeof(d));
	if (c->bad)
		goto bad;
	what = "counters";
	if (u[13] > CFG_MAX_WORKERS || u[14] >= WINDOW_N || u[15] > WINDOW_N ||
	    u[17] > (1u << 24) || u[18] > (1u << 24) || u[19] > (1u << 20) ||
	    u[20] > VHIST_MAX || u[5] > r->data->train.n || u[12] >= (uint64_t)rule_count())
		goto bad;
	r->cfg = cfg;
	r->samples = u[0];
	r->updates = u[1];
	r->loss_n = (long)u[2];
	r->taken = u[3];
	r->take_limit = u[4];
	r->pos = (uint32_t)u[5];
	r->shuffles = u[6];
	r->next_eval_v = u[7];
	r->epochs_done = u[8];
	r->clock_gap_max = u[9];
	r->sched_pos = (int)u[10];
	r->ev_seq = u[11];
	if (u[12] >= (uint64_t)rule_count())
		goto bad;
	r->rule = rule_table[u[12]];
	int n_slots = (int)u[13];
	r->win_pos = (int)u[14];
	r->win_n = (int)u[15];
	r->paused = (int)u[16];
	int n_series = (int)u[17], n_ev = (int)u[18], n_held = (int)u[19];
	int vh_depth = (int)u[20];
	r->loss_sum = d[0];
	r->vtime = d[1];
	r->t_base = d[2];
	r->eval_s = d[3];
	r->best_acc = d[4];
	r->last_acc = d[5];
	r->last_test_loss = d[6];
	r->last_train_loss = d[7];
	cur_get(c, &r->shuf, sizeof(r->shuf));
	cur_get(c, &r->hist, sizeof(r->hist));
	cur_get(c, &r->age, sizeof(r->age));
	cur_get(c, r->win_tau, sizeof(r->win_tau));
	cur_get(c, r->win_t, sizeof(r->win_t));
	cur_get(c, r->perm, sizeof(uint32_t) * r->data->train.n);
	what = "series";
	if (c->bad)
		goto bad;
	for (uint32_t i = 0; i < r->data->train.n; i++)
		if (r->perm[i] >= r->data->train.n)
			goto bad;
	if (n_series) {
		run_eval *sr = malloc(sizeof(run_eval) * (size_t)n_series);
		if (!sr || cur_get(c, sr, sizeof(run_eval) * (size_t)n_series) < 0) {
			free(sr);
			goto bad;
		}
		for (int i = 0; i < n_series; i++)
			sr[i].stop_reason = NULL;
		free(r->series);
		r->series = sr;
		r->n_series = r->cap_series = n_series;
	}
	what = "events";
	if (n_ev) {
		vevent *ev = malloc(sizeof(vevent) * (size_t)n_ev);
		if (!ev || cur_get(c, ev, sizeof(vevent) * (size_t)n_ev) < 0) {
			free(ev);
			goto bad;
		}
		for (int i = 0; i < n_ev; i++)
			if (ev[i].worker < 0 || ev[i].worker >= n_slots || ev[i].kind < 0 ||
			    ev[i].kind > EV_HELD) {
				free(ev);
				goto bad;
			}
		free(r->ev);
		r->ev = ev;
		r->n_ev = r->cap_ev = n_ev;
	}
	what = "schedule";
	uint64_t n_sched = cur_u64(c);
	if (c->bad || n_sched > (1u << 20) || u[10] > n_sched)
		goto bad;
	if (n_sched) {
		run_sched *sc = malloc(sizeof(run_sched) * n_sched);
		if (!sc || cur_get(c, sc, sizeof(run_sched) * n_sched) < 0) {
			free(sc);
			goto bad;
		}
		free(r->sched);
		r->sched = sc;
	}
	r->n_sched = (int)n_sched;
	what = "version history";
	for (int i = r->vh_depth; i < vh_depth; i++)
		r->vh[i] = NULL;
	for (int i = 0; i < vh_depth; i++) {
		r->vh_v[i] = cur_u64(c);
		if (get_floats(c, r->be_ps, &r->vh[i], r->n_params) < 0)
			goto bad;
	}
	if (vh_depth > r->vh_depth)
		r->vh_depth = vh_depth;
	what = "parameter server";
	if (ps_restore(r->ps, c) < 0)
		goto bad;
	ps_set_opt(r->ps, (float)cfg.lr, (float)cfg.momentum, (float)cfg.weight_decay);
	what = "held gradients";
	for (int i = 0; i < n_held; i++) {
		held h;
		if (cur_get(c, &h, sizeof(h)) < 0 || h.off >= r->n_params ||
		    h.worker < 0 || h.worker >= n_slots)
			goto bad;
		int has_bak = h.bak != NULL;
		h.g = malloc(sizeof(float) * r->n_params);
		h.bak = has_bak ? malloc(sizeof(float) * r->n_params) : NULL;
		if (!h.g || (has_bak && !h.bak) ||
		    cur_get(c, h.g + h.off, sizeof(float) * (r->n_params - h.off)) < 0 ||
		    (has_bak && cur_get(c, h.bak, sizeof(float) * r->n_params) < 0)) {
			free(h.g);
			free(h.bak);
			goto bad;
		}
		if (r->n_held == r->cap_held) {
			int cap = r->cap_held ? 2 * r->cap_held : 16;
			held *nh = realloc(r->held, sizeof(held) * (size_t)cap);
			if (!nh) {
				free(h.g);
				free(h.bak);
				goto bad;
			}
			r->held = nh;
			r->cap_held = cap;
		}
		r->held[r->n_held++] = h;
	}
	what = "workers";
	for (int i = 0; i < n_slots; i++) {
		worker saved;
		if (cur_get(c, &saved, sizeof(saved)) < 0 || saved.id != i ||
		    saved.batch_n < 0)
			goto bad;
		worker *w;
		if (i >= r->n_slots) {
			if (worker_new(r, i, &w) < 0)
				goto bad;
			r->w[i] = w;
			r->n_slots = i + 1;
		}
		w = r->w[i];
		/* scalars from the file, pointers and threads from this run */
		worker keep = *w;
		*w = saved;
		w->m = keep.m;
		w->be = keep.be;
		w->idx = keep.idx;
		w->idx_cap = keep.idx_cap;
		w->ms = keep.ms;
		w->wprev = keep.wprev;
		w->tmp = keep.tmp;
		w->th = keep.th;
		w->thread_live = 0;
		w->exited = 0;
		if (saved.idx_cap != w->idx_cap || w->batch_n > w->idx_cap ||
		    cur_get(c, w->idx, sizeof(uint32_t) * (size_t)w->idx_cap) < 0)
			goto bad;
		for (int k = 0; k < w->batch_n; k++)
			if (w->idx[k] >= r->data->train.n)
				goto bad;
		if (get_floats(c, w->be, &w->m->params, r->n_params) < 0 ||
		    get_floats(c, w->be, &w->m->grads, r->n_params) < 0 ||
		    get_floats(c, w->be, &w->ms, r->n_params) < 0 ||
		    get_floats(c, w->be, &w->wprev, r->n_params) < 0)
			goto bad;
		if (w->ms && !w->tmp)
			w->tmp = w->be->ops->alloc(w->be, sizeof(float) * r->n_params);
		if (!r->virt) {
			/* threads start afresh: what was in flight is dropped */
			if (w->st != W_WAIT_BEGIN)
				w->st = W_IDLE;
			w->pending = 0;
		}
	}
	const void *tail = cur_view(c, 8);
	if (!tail || memcmp(tail, CKPT_MAGIC, 8) || c->off != c->n)
		goto bad;
	return 0;
bad:
	return sl_fail(err, SL_EFORMAT, "checkpoint corrupt or truncated (in its %s)", what);
}

int
run_restore(run *r, const uint8_t *buf, size_t len, char *err)
{
	cursor c = {buf, len, 0, 0};
	pthread_mutex_lock(&r->mu);
	int rc = r->exec_live ? sl_fail(err, SL_ESTATE, "resume: the run has started")
			      : restore_state(r, &c, err);
	if (rc == 0) {
		r->restored = 1;
		report_publish(r);
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

int
run_checkpoint(run *r, uint8_t **buf, size_t *len, char *err)
{
	*buf = NULL;
	*len = 0;
	pthread_mutex_lock(&r->mu);
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
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
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
