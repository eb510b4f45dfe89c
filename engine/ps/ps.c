/* ps.c - parameter server state and the rules' server-side arithmetic. */
#include "ps.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "model.h"
#include "optim.h"
#include "sl.h"
#include "tlv.h"

struct ps {
	backend *be;
	backend *ex;     /* runs the update arithmetic: be, or a lender's (ps_lend) */
	size_t n;
	int n_layers;
	ps_layer *layers;
	int max_workers;
	float *w;        /* weights */
	optim opt;       /* the optimiser's state: momentum, Adam's moments */
	opt_cfg oc;      /* the optimiser, the schedule, clipping */
	float *tmp;      /* scratch: compensated gradient, averaged round */
	float *acc;      /* sync rules: sum of the round's gradients */
	int *layer_count;/* sync rules: contributors per layer this round */
	float *cnt;      /* ... and per float, when messages are sparse (demo;
			  * made on use) */
	int *unit_of;    /* streaming-diloco: each layer's unit (ps_set_units) */
	int round;       /* gradients in the current round */
	float **bak;     /* DC-ASGD: weights each worker last pulled */
	float **ms;      /* DC-ASGD adaptive: mean square per worker */
	uint64_t v;
	/* zero-copy reads: workers computing on w in place (pins); a write
	 * while w is pinned goes to a copy, and the pinned buffer is retired
	 * until its last reader is done */
	int pins;
	struct retired {
		float *buf;
		int pins;
	} *old;
	int n_old, cap_old;
	float *spare;
	float *stage;    /* host payloads, staged into a device server's memory */
	float *stage_bak;/* ... and a held gradient's backup (DC-ASGD) */
	float *stage_kept;/* ... and a sparse payload's mask (demo) */
	float *outer_m;  /* diloco: the outer Nesterov momentum (made on use) */
	int oom;         /* a copy could not be made: written in place */
	const rule_class *rule;
	rule_params rp;
	float lr, mu, wd;
};

static void *
balloc(ps *p, size_t floats)
{
	return p->be->ops->alloc(p->be, sizeof(float) * (floats ? floats : 1));
}

int
ps_new(backend *be, size_t n, const float *w0, const ps_layer *layers,
       int n_layers, int max_workers, ps **out)
{
	*out = NULL;
	if (!n || n_layers < 1 || max_workers < 1)
		return -SL_EINVAL;
	ps *p = calloc(1, sizeof(*p));
	if (!p)
		return -SL_ENOMEM;
	p->be = p->ex = be;
	p->n = n;
	p->n_layers = n_layers;
	p->max_workers = max_workers;
	p->layers = malloc(sizeof(ps_layer) * (size_t)n_layers);
	p->layer_count = calloc((size_t)n_layers, sizeof(int));
	p->unit_of = calloc((size_t)n_layers, sizeof(int));
	p->bak = calloc((size_t)max_workers, sizeof(float *));
	p->ms = calloc((size_t)max_workers, sizeof(float *));
	p->w = balloc(p, n);
	p->tmp = balloc(p, n);
	p->acc = balloc(p, n);
	if (!p->layers || !p->layer_count || !p->unit_of || !p->bak || !p->ms || !p->w ||
	    !p->tmp || !p->acc) {
		ps_free(p);
		return -SL_ENOMEM;
	}
	memcpy(p->layers, layers, sizeof(ps_layer) * (size_t)n_layers);
	for (int l = 0; l < n_layers; l++)
		p->unit_of[l] = l;
	if (optim_init(&p->opt, be, n, p->layers, n_layers) < 0) {
		ps_free(p);
		return -SL_ENOMEM;
	}
	be->ops->upload(be, p->w, w0, sizeof(float) * n);
	p->rule = rule_find("asgd");
	p->lr = 0.05f;
	p->oc = (opt_cfg){.kind = OPT_SGD, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
			  .sched = {.floor = 1, .gamma = 1}};
	*out = p;
	return 0;
}

void
ps_free(ps *p)
{
	if (!p)
		return;
	backend *be = p->be;
	for (int k = 0; k < p->max_workers; k++) {
		if (p->bak)
			be->ops->free(be, p->bak[k]);
		if (p->ms)
			be->ops->free(be, p->ms[k]);
	}
	be->ops->free(be, p->w);
	for (int i = 0; i < p->n_old; i++)
		be->ops->free(be, p->old[i].buf);
	free(p->old);
	be->ops->free(be, p->spare);
	be->ops->free(be, p->stage);
	be->ops->free(be, p->stage_bak);
	be->ops->free(be, p->stage_kept);
	be->ops->free(be, p->cnt);
	be->ops->free(be, p->outer_m);
	optim_free(&p->opt);
	be->ops->free(be, p->tmp);
	be->ops->free(be, p->acc);
	free(p->bak);
	free(p->ms);
	free(p->layers);
	free(p->layer_count);
	free(p->unit_of);
	free(p);
}

static void
drop_round(ps *p)
{
	p->round = 0;
	memset(p->layer_count, 0, sizeof(int) * (size_t)p->n_layers);
	p->be->ops->zero(p->be, p->acc, sizeof(float) * p->n);
	if (p->cnt)
		p->be->ops->zero(p->be, p->cnt, sizeof(float) * p->n);
}

void
ps_set_rule(ps *p, const rule_class *rc, const rule_params *rp)
{
	p->rule = rc;
	p->rp = *rp;
	drop_round(p);
}

void
ps_set_opt(ps *p, float lr, float momentum, float weight_decay)
{
	p->lr = lr;
	p->mu = momentum;
	p->wd = weight_decay;
	if (momentum > 0 && !p->opt.m)
		p->opt.m = balloc(p, p->n); /* zeroed */
}

int
ps_set_optim(ps *p, const opt_cfg *oc)
{
	p->oc = *oc;
	return optim_set(&p->opt, oc, p->mu);
}

ps_layer
ps_layer_make(size_t off, size_t len, size_t wlen, size_t n_weights, size_t w_cols)
{
	ps_layer L = {.off = off, .len = len, .wlen = wlen};
	if (w_cols && n_weights && n_weights % w_cols == 0 && n_weights <= len) {
		L.rows = n_weights / w_cols;
		L.cols = w_cols;
	} else if (n_weights && n_weights < len && len % n_weights == 0) {
		L.vlen = n_weights; /* gains, then biases of as many */
	}
	return L;
}

int
ps_model_layers(const model *m, ps_layer *out, int cap)
{
	node_info *info = malloc(sizeof(node_info) * MODEL_MAX_NODES);
	SL_ASSERT(info != NULL);
	int nl = model_node_info(m, info, MODEL_MAX_NODES), np = 0;
	for (int i = 0; i < nl && np < cap; i++)
		if (info[i].n_params)
			out[np++] = ps_layer_make(info[i].p_off, info[i].n_params, info[i].n_decay,
						  info[i].n_weights, info[i].w_cols);
	free(info);
	return np;
}

const ps_layer *
ps_layers(const ps *p, int *n)
{
	*n = p->n_layers;
	return p->layers;
}

void
ps_set_units(ps *p, const int *unit_of)
{
	memcpy(p->unit_of, unit_of, sizeof(int) * (size_t)p->n_layers);
}

int
ps_units(const ps *p)
{
	return p->unit_of[p->n_layers - 1] + 1;
}

int
ps_fragment_ranges(const ps *p, int part, int parts, ps_range *out, size_t *floats)
{
	int n = 0;
	size_t total = 0;
	for (int l = 0; l < p->n_layers; l++) {
		if (parts < 1 || p->unit_of[l] % parts != part)
			continue;
		const ps_layer *L = &p->layers[l];
		if (n && out[n - 1].off + out[n - 1].len == L->off)
			out[n - 1].len += L->len;
		else
			out[n++] = (ps_range){L->off, L->len};
		total += L->len;
	}
	if (floats)
		*floats = total;
	return n;
}

const opt_cfg *
ps_optim(const ps *p)
{
	return &p->oc;
}

uint64_t
ps_version(const ps *p)
{
	return p->v;
}

const float *
ps_weights(const ps *p)
{
	return p->w;
}

size_t
ps_size(const ps *p)
{
	return p->n;
}

/* Before the weights change: if readers compute on them in place, move
 * the current buffer aside for them and write to a copy. */
static void
writable(ps *p)
{
	if (!p->pins)
		return;
	if (p->n_old == p->cap_old) {
		int cap = p->cap_old ? 2 * p->cap_old : 8;
		struct retired *o = realloc(p->old, sizeof(*o) * (size_t)cap);
		if (!o) {
			p->oom = 1;
			return;
		}
		p->old = o;
		p->cap_old = cap;
	}
	float *nw = p->spare ? p->spare : balloc(p, p->n);
	if (!nw) {
		p->oom = 1;
		return;
	}
	p->spare = NULL;
	p->be->ops->copy(p->be, nw, p->w, sizeof(float) * p->n);
	p->old[p->n_old++] = (struct retired){p->w, p->pins};
	p->w = nw;
	p->pins = 0;
}

/* DC-ASGD: remember the weights `worker` reads */
static void
keep_backup(ps *p, int worker, const float *w)
{
	if (!(p->rule->flags & RULE_BACKUP) || worker < 0 || worker >= p->max_workers)
		return;
	if (!p->bak[worker])
		p->bak[worker] = balloc(p, p->n);
	if (p->bak[worker])
		p->be->ops->copy(p->be, p->bak[worker], w, sizeof(float) * p->n);
}

const float *
ps_backup(const ps *p, int worker)
{
	if (worker < 0 || worker >= p->max_workers)
		return NULL;
	return p->bak[worker];
}

void
ps_pull_old(ps *p, int worker, const float *old, uint64_t v_old, float *dst,
	    uint64_t *have)
{
	keep_backup(p, worker, old);
	p->be->ops->copy(p->be, dst, old, sizeof(float) * p->n);
	*have = v_old;
}

const float *
ps_pin(ps *p, int worker, uint64_t *v)
{
	keep_backup(p, worker, p->w);
	p->pins++;
	*v = p->v;
	return p->w;
}

void
ps_unpin(ps *p, const float *buf)
{
	if (buf == p->w) {
		if (p->pins > 0)
			p->pins--;
		return;
	}
	for (int i = 0; i < p->n_old; i++) {
		if (p->old[i].buf != buf)
			continue;
		if (--p->old[i].pins == 0) {
			/* keep one buffer for the next copy, free the rest */
			if (!p->spare)
				p->spare = p->old[i].buf;
			else
				p->be->ops->free(p->be, p->old[i].buf);
			p->old[i] = p->old[--p->n_old];
		}
		return;
	}
}

int
ps_failed(const ps *p)
{
	return p->oom;
}

int
ps_pull(ps *p, int worker, float *dst, uint64_t *have)
{
	backend *be = p->be;
	keep_backup(p, worker, p->w);
	if (*have == p->v && dst)
		return 0;
	if (dst)
		be->ops->copy(be, dst, p->w, sizeof(float) * p->n);
	*have = p->v;
	return 1;
}

void
ps_lend(ps *p, backend *be)
{
	p->ex = be && be != p->be && be->ops == p->be->ops &&
			be->ops->host_memory ? be : p->be;
}

void
ps_step(ps *p, const float *g, size_t off, float lr)
{
	writable(p);
	optim_step(&p->opt, p->ex, p->w, g, off, &p->oc, lr, p->mu, p->wd);
	p->v++;
}

int
ps_round_pending(const ps *p)
{
	return p->round;
}

float
ps_lr(const ps *p)
{
	if (p->oc.sched.kind == SCHED_CONSTANT && !(p->oc.sched.warmup > 0))
		return p->lr;
	return (float)(p->lr * lr_sched_factor(&p->oc.sched, p->v));
}

void
ps_opt(const ps *p, float *lr, float *momentum, float *weight_decay)
{
	*lr = ps_lr(p);
	*momentum = p->mu;
	*weight_decay = p->wd;
}

const rule_params *
ps_params(const ps *p)
{
	return &p->rp;
}

backend *
ps_backend(const ps *p)
{
	return p->be;
}

float *
ps_scratch(ps *p)
{
	return p->tmp;
}

const float *
ps_round_sum(const ps *p)
{
	return p->acc;
}

const float *
ps_round_senders(const ps *p)
{
	return p->cnt;
}

float *
ps_weights_rw(ps *p)
{
	writable(p);
	return p->w;
}

float *
ps_worker_state(ps *p, int worker)
{
	if (worker < 0 || worker >= p->max_workers)
		return NULL;
	if (!p->ms[worker])
		p->ms[worker] = balloc(p, p->n);
	return p->ms[worker];
}

static void
apply_round(ps *p)
{
	backend *be = p->ex;
	writable(p);
	if (p->rule->server_round) {
		if (p->rule->server_round(p, p->layer_count) < 0)
			p->oom = 1;
		p->v++;
		drop_round(p);
		return;
	}
	for (int l = 0; l < p->n_layers; l++) {
		int c = p->layer_count[l];
		const ps_layer *L = &p->layers[l];
		if (c) /* nobody sent this layer: not updated */
			be->ops->scal(be, L->len, 1.0f / (float)c, p->acc + L->off);
	}
	optim_step_layers(&p->opt, be, p->w, p->acc, p->layer_count, &p->oc, ps_lr(p), p->mu,
			  p->wd);
	p->v++;
	drop_round(p);
}

int
ps_round_add(ps *p, const ps_grad *g, int round_size)
{
	backend *be = p->ex;
	be->ops->axpy(be, p->n - g->off, 1.0f, g->g + g->off, p->acc + g->off);
	if (g->kept) {
		if (!p->cnt && !(p->cnt = balloc(p, p->n))) {
			p->oom = 1;
			return 0;
		}
		be->ops->axpy(be, p->n - g->off, 1.0f, g->kept + g->off, p->cnt + g->off);
	}
	for (int l = 0; l < p->n_layers; l++)
		if (p->layers[l].off >= g->off)
			p->layer_count[l]++;
	p->round++;
	if (p->round < (round_size < 1 ? 1 : round_size))
		return 0;
	apply_round(p);
	p->be->ops->sync(p->be);
	return 1;
}

/* host floats [off, n) of src where the server's backend can read them:
 * in place, or staged into *buf in the server's memory (a host payload, a
 * device server) */
static const float *
staged(ps *p, float **buf, const float *src, size_t off, int host)
{
	if (!src || !host || p->be->ops->host_memory)
		return src;
	if (!*buf && !(*buf = balloc(p, p->n)))
		return NULL;
	p->be->ops->upload(p->be, *buf + off, src + off, sizeof(float) * (p->n - off));
	return *buf;
}

static void elastic(ps *p, const float *x, float alpha, float *diff, int host);
static int fragment_first(const ps *p, int part, int parts);
static int apply_fragment(ps *p, int part, int parts, int c);
static int average(ps *p, const float *x, int round_size);

int
ps_push(ps *p, const ps_grad *g, int round_size, ps_result *res)
{
	ps_result r = {0};
	if (g->off >= p->n || g->worker < 0 || g->worker >= p->max_workers ||
	    !g->g || (g->kind != PS_GRADIENT && g->off) ||
	    (g->kind == PS_ELASTIC && !g->reply) || (unsigned)g->kind > PS_ELASTIC ||
	    (g->kept && g->kind != PS_GRADIENT))
		return -SL_EINVAL;
	const float *data = staged(p, &p->stage, g->g, g->off, g->host);
	/* a held gradient's backup is whole: DC-ASGD reads it from off on */
	const float *bak = staged(p, &p->stage_bak, g->bak, 0, g->host);
	const float *kept = staged(p, &p->stage_kept, g->kept, g->off, g->host);
	if (!data || (g->bak && !bak) || (g->kept && !kept))
		return -SL_ENOMEM;
	r.tau = p->v >= g->v_read ? p->v - g->v_read : 0;
	if (g->kind == PS_MODEL) {
		int rc = average(p, data, round_size);
		if (rc < 0)
			return rc;
		r.applied = rc;
	} else if (g->kind == PS_ELASTIC) {
		elastic(p, data, g->alpha, g->reply, g->host);
		r.applied = 1;
	} else if (p->rule->server_push) {
		ps_grad m = *g;
		m.g = data;
		m.bak = bak;
		m.kept = kept;
		m.host = 0;
		int rc = p->rule->server_push(p, &m, round_size, &r);
		if (rc < 0)
			return rc;
	} else {
		ps_step(p, data, g->off, ps_lr(p));
		r.applied = 1;
	}
	/* done before the caller lets go of the lock: another backend (a
	 * worker's stream, the evaluator's) may read the weights next */
	p->be->ops->sync(p->be);
	if (res)
		*res = r;
	return 0;
}

int
ps_flush_round(ps *p, int round_size)
{
	if (p->rule->flags & RULE_FRAGMENTS) {
		/* a fragment's round (one is pending at a time) */
		int parts = p->rp.fragments < 1 ? 1 : (int)p->rp.fragments;
		for (int part = 0; part < parts; part++) {
			int l = fragment_first(p, part, parts);
			int c = l < 0 ? 0 : p->layer_count[l];
			if (c > 0 && c >= round_size)
				return apply_fragment(p, part, parts, c) > 0;
		}
		return 0;
	}
	if (!(p->rule->flags & RULE_ROUND) || p->round == 0 || p->round < round_size)
		return 0;
	apply_round(p);
	return 1;
}

static void
elastic(ps *p, const float *x, float alpha, float *diff, int host)
{
	backend *be = p->be;
	/* diff = alpha (x - w); w += diff (the worker then takes x -= diff) */
	be->ops->copy(be, p->tmp, x, sizeof(float) * p->n);
	be->ops->axpy(be, p->n, -1.0f, p->w, p->tmp);
	be->ops->scal(be, p->n, alpha, p->tmp);
	writable(p);
	be->ops->axpy(be, p->n, 1.0f, p->tmp, p->w);
	if (host && !be->ops->host_memory)
		be->ops->download(be, diff, p->tmp, sizeof(float) * p->n);
	else
		be->ops->copy(be, diff, p->tmp, sizeof(float) * p->n);
	p->v++;
}

/* ps_outer_step on floats [off, off + len) alone (db, dw indexed as the
 * whole buffer) */
static int
outer_step_range(ps *p, size_t off, size_t len, const float *db, float sb, const float *dw,
		 float sw, int with_b)
{
	backend *be = p->be;
	const char *kind = p->rp.outer_opt;
	const int heavy = !strcmp(kind, "momentum");
	const float eta = (float)p->rp.outer_lr;
	const float mu = !strcmp(kind, "sgd") ? 0.0f : (float)p->rp.outer_momentum;
	if (mu > 0 && (db || with_b) && !p->outer_m && !(p->outer_m = balloc(p, p->n)))
		return -SL_ENOMEM;
	writable(p);
	float *w = p->w + off, *b = p->outer_m ? p->outer_m + off : NULL;
	/* heavy ball applies the momentum as it was (w -= eta (d + mu b_old),
	 * torch's b = mu b + d, w -= eta b); Nesterov the one just updated */
	if (heavy && mu > 0 && with_b)
		be->ops->axpy(be, len, -eta * mu, b, w);
	if (mu > 0 && db) {
		be->ops->scal(be, len, mu, b);
		be->ops->axpy(be, len, sb, db + off, b);
	}
	be->ops->axpy(be, len, -eta * sw, dw + off, w);
	if (!heavy && mu > 0 && with_b)
		be->ops->axpy(be, len, -eta * mu, b, w);
	return 0;
}

int
ps_outer_step(ps *p, const float *db, float sb, const float *dw, float sw, int with_b)
{
	return outer_step_range(p, 0, p->n, db, sb, dw, sw, with_b);
}

/* the first layer of fragment part of parts, or -1 (none: more parts
 * than units) */
static int
fragment_first(const ps *p, int part, int parts)
{
	for (int l = 0; l < p->n_layers; l++)
		if (p->unit_of[l] % parts == part)
			return l;
	return -1;
}

/* fragment part's round of c models (their sum in acc) through the outer
 * optimiser; the version advances */
static int
apply_fragment(ps *p, int part, int parts, int c)
{
	backend *be = p->be;
	ps_range rg[p->n_layers];
	int nr = ps_fragment_ranges(p, part, parts, rg, NULL);
	/* Delta = W - mean on the fragment, in the scratch; then the outer
	 * step there, as diloco's round does on the whole */
	float *d = p->tmp;
	for (int i = 0; i < nr; i++) {
		size_t o = rg[i].off, n = rg[i].len;
		be->ops->scal(be, n, 1.0f / (float)c, p->acc + o);
		be->ops->copy(be, d + o, p->w + o, sizeof(float) * n);
		be->ops->axpy(be, n, -1.0f, p->acc + o, d + o);
	}
	for (int i = 0; i < nr; i++) {
		int rc = outer_step_range(p, rg[i].off, rg[i].len, d, 1.0f, d, 1.0f, 1);
		if (rc < 0)
			return rc;
		be->ops->zero(be, p->acc + rg[i].off, sizeof(float) * rg[i].len);
	}
	for (int l = 0; l < p->n_layers; l++)
		if (p->unit_of[l] % parts == part)
			p->layer_count[l] = 0;
	p->v++;
	return 1;
}

int
ps_fragment_add(ps *p, const ps_grad *g, int parts, int round_size)
{
	if (parts < 1 || g->part < 0 || g->part >= parts || g->part >= ps_units(p))
		return -SL_EINVAL;
	backend *be = p->be;
	ps_range rg[p->n_layers];
	int nr = ps_fragment_ranges(p, g->part, parts, rg, NULL);
	for (int l = 0; l < p->n_layers; l++)
		if (p->unit_of[l] % parts == g->part)
			p->layer_count[l]++;
	for (int i = 0; i < nr; i++)
		be->ops->axpy(be, rg[i].len, 1.0f, g->g + rg[i].off, p->acc + rg[i].off);
	int c = p->layer_count[fragment_first(p, g->part, parts)];
	if (c < (round_size < 1 ? 1 : round_size))
		return 0;
	return apply_fragment(p, g->part, parts, c);
}

int
ps_outer_arrival(ps *p, const float *d, float wt)
{
	const int N = p->rp.dn_period > 1 ? (int)p->rp.dn_period : 1;
	int rc;
	if (N == 1) {
		rc = ps_outer_step(p, d, wt, d, wt, 1);
	} else {
		p->be->ops->axpy(p->be, p->n, wt, d, p->acc);
		if (++p->round >= N) {
			rc = ps_outer_step(p, p->acc, 1.0f / (float)N, d, wt / (float)N, 1);
			drop_round(p);
		} else {
			rc = ps_outer_step(p, NULL, 0, d, wt / (float)N, 0);
		}
	}
	if (rc == 0)
		p->v++;
	return rc;
}

/* diloco's outer step on the round's mean model (in acc): the
 * pseudo-gradient Delta = w - mean, then torch.optim.SGD's Nesterov form,
 * b = mu b + Delta, w -= eta (Delta + mu b); mu = 0 is plain outer SGD,
 * and eta = 1 with it puts w at the mean (localsgd, to rounding) */
static int
outer_step(ps *p)
{
	backend *be = p->be;
	float *d = p->tmp;
	be->ops->copy(be, d, p->w, sizeof(float) * p->n);
	be->ops->axpy(be, p->n, -1.0f, p->acc, d);
	return ps_outer_step(p, d, 1.0f, d, 1.0f, 1);
}

static int
average(ps *p, const float *x, int round_size)
{
	backend *be = p->be;
	be->ops->axpy(be, p->n, 1.0f, x, p->acc);
	p->round++;
	if (p->round < (round_size < 1 ? 1 : round_size))
		return 0;
	be->ops->scal(be, p->n, 1.0f / (float)p->round, p->acc);
	if (p->rule->flags & RULE_OUTER) {
		int rc = outer_step(p);
		if (rc < 0)
			return rc;
	} else {
		writable(p);
		be->ops->copy(be, p->w, p->acc, sizeof(float) * p->n);
	}
	p->v++;
	drop_round(p);
	return 1;
}

void
ps_load(ps *p, const float *w, uint64_t v)
{
	writable(p);
	p->be->ops->upload(p->be, p->w, w, sizeof(float) * p->n);
	p->v = v;
	drop_round(p);
}

float *
ps_momentum(ps *p)
{
	return p->mu > 0 ? p->opt.m : NULL;
}

void
ps_advance(ps *p)
{
	p->v++;
}

/* ---- checkpoints (tagged fields, engine/base/tlv.h) ---- */

/* a backend buffer of n floats as a field (absent when NULL) */
static void
save_buf(const ps *p, tlv_w *w, const char *name, const float *buf)
{
	if (!buf)
		return;
	void *dst = tlv_reserve(w, name, TLV_F32S, sizeof(float) * p->n);
	if (dst)
		p->be->ops->download(p->be, dst, buf, sizeof(float) * p->n);
}

void
ps_save(const ps *p, tlv_w *w)
{
	tlv_u64(w, "v", p->v);
	tlv_i64(w, "round", p->round);
	uint64_t lc[p->n_layers];
	for (int i = 0; i < p->n_layers; i++)
		lc[i] = (uint64_t)p->layer_count[i];
	tlv_array(w, "layer_count", TLV_U64S, lc, (size_t)p->n_layers);
	save_buf(p, w, "weights", p->w);
	save_buf(p, w, "momentum", p->opt.m);
	save_buf(p, w, "second_moment", p->opt.v);
	if (p->opt.v)
		tlv_array(w, "opt_steps", TLV_U64S, p->opt.steps, (size_t)p->n_layers);
	save_buf(p, w, "round_sum", p->acc);
	save_buf(p, w, "round_senders", p->cnt);
	save_buf(p, w, "outer_momentum", p->outer_m);
	tlv_open(w, "backups", TLV_LIST);
	for (int k = 0; k < p->max_workers; k++) {
		if (!p->bak[k] && !p->ms[k])
			continue;
		tlv_open(w, "", TLV_SEC);
		tlv_i64(w, "worker", k);
		save_buf(p, w, "weights", p->bak[k]);
		save_buf(p, w, "mean_square", p->ms[k]);
		tlv_close(w);
	}
	tlv_close(w);
}

/* field `name` (n floats) into *buf (allocated when NULL); p NULL: check
 * only. Absent: *buf is kept (zeroed or NULL). */
static int
load_buf(ps *p, const tlv_sec *s, const char *name, int req, size_t n, float **buf,
	 char *err)
{
	const void *src;
	int rc = tlv_get_array(s, name, req, TLV_F32S, n, &src, NULL, err);
	if (rc <= 0 || !p)
		return rc;
	if (!*buf && !(*buf = balloc(p, p->n)))
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	p->be->ops->upload(p->be, *buf, src, sizeof(float) * p->n);
	return 0;
}

int
ps_restore(ps *p, const tlv_sec *s, size_t n, char *err)
{
	uint64_t v;
	int64_t round;
	const void *lc;
	size_t n_layers;
	int rc;
	if ((rc = tlv_get_u64(s, "v", 1, &v, err)) < 0 ||
	    (rc = tlv_get_i64(s, "round", 1, &round, err)) < 0 ||
	    (rc = tlv_get_array(s, "layer_count", 1, TLV_U64S, p ? (size_t)p->n_layers
								: SIZE_MAX,
				&lc, &n_layers, err)) < 0)
		return rc;
	int max_workers = p ? p->max_workers : PS_MAX_WORKERS;
	if (round < 0 || round > (int64_t)max_workers * 1000)
		return tlv_bad(err, s, "round", "= %lld is out of range", (long long)round);
	for (size_t i = 0; i < n_layers; i++) {
		uint64_t c;
		memcpy(&c, (const uint8_t *)lc + 8 * i, 8);
		if (c > (uint64_t)max_workers * 1000)
			return tlv_bad(err, s, "layer_count", "holds %llu",
				       (unsigned long long)c);
		if (p)
			p->layer_count[i] = (int)c;
	}
	float *none = NULL;
	if ((rc = load_buf(p, s, "weights", 1, n, p ? &p->w : &none, err)) < 0 ||
	    (rc = load_buf(p, s, "momentum", 0, n, p ? &p->opt.m : &none, err)) < 0 ||
	    (rc = load_buf(p, s, "second_moment", 0, n, p ? &p->opt.v : &none, err)) < 0 ||
	    (rc = load_buf(p, s, "round_sum", 0, n, p ? &p->acc : &none, err)) < 0 ||
	    (rc = load_buf(p, s, "round_senders", 0, n, p ? &p->cnt : &none, err)) < 0 ||
	    (rc = load_buf(p, s, "outer_momentum", 0, n, p ? &p->outer_m : &none, err)) < 0)
		return rc;
	const void *st;
	size_t n_st;
	if ((rc = tlv_get_array(s, "opt_steps", 0, TLV_U64S, p ? (size_t)p->n_layers : SIZE_MAX,
				&st, &n_st, err)) < 0)
		return rc;
	if (rc > 0 && p)
		memcpy(p->opt.steps, st, sizeof(uint64_t) * (size_t)p->n_layers);
	tlv_sec list, it;
	if ((rc = tlv_get_sec(s, "backups", 1, TLV_LIST, &list, err)) < 0)
		return rc;
	size_t off = 0;
	int i = 0;
	while (tlv_item(&list, &off, &i, &it)) {
		int64_t k;
		if ((rc = tlv_get_i64(&it, "worker", 1, &k, err)) < 0)
			return rc;
		if (k < 0 || k >= max_workers)
			return tlv_bad(err, &it, "worker", "= %lld is out of range", (long long)k);
		if ((rc = load_buf(p, &it, "weights", 0, n, p ? &p->bak[k] : &none, err)) < 0 ||
		    (rc = load_buf(p, &it, "mean_square", 0, n, p ? &p->ms[k] : &none, err)) < 0)
			return rc;
	}
	if (p) {
		p->v = v;
		p->round = (int)round;
	}
	return 0;
}
