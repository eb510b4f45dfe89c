/* run.c - the asynchronous engine: workers, rules' worker-side logic,
 * delays, staleness accounting, evaluation, control and snapshots, on the
 * wall clock (threads) or the virtual clock (discrete events). */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "blob.h"
#include "delay.h"
#include "model.h"
#include "ps.h"
#include "rng.h"

#define WINDOW_N 4096       /* sliding staleness window: last updates ... */
#define WINDOW_S 5.0        /* ... of the last seconds */
#define NOMINAL_FLOPS 10e9  /* virtual clock: a worker's nominal FLOP/s */
#define VHIST_MAX 65        /* version-delay weight history (s <= 64) */
#define HELD_MAX 32         /* gradients a worker may have held at the server */
#define SNAP_EVERY_S 0.1
#define PROGRESS_EVERY_S 0.2

typedef enum wstate {
	W_IDLE,       /* between iterations */
	W_WAIT_BEGIN, /* blocked by the rule, a pause, or the end of data */
	W_COMPUTE,
	W_DELAY,
	W_WAIT_PUSH,  /* odsgd: previous round not complete yet */
} wstate;

typedef struct worker {
	int id;
	int active;       /* counted in the run's workers */
	int paused;
	delay_cfg delay;
	int spb_depth;
	double speed;
	rng rng_delay;
	model *m;         /* replica: m->params holds the weights it computes on */
	backend *be;
	uint64_t have;    /* version held in m->params (UINT64_MAX: none) */
	uint64_t v_read;  /* version the current gradient is computed on */
	double t_read;    /* when it read those weights (run seconds) */
	uint64_t clock;   /* iterations pushed (the SSP clock) */
	uint64_t seq;
	int waiting;      /* in a sync round or an average */
	uint64_t wait_v;  /* ... released when the version passes this */
	int64_t last_round; /* odsgd: round last pushed into (-1 none) */
	int batch_n;
	int depth;        /* spb_depth of the step in flight (read at pull) */
	int want_threads, cur_threads; /* wall: team width, set at a pull */
	size_t grad_off;  /* ... and the start of the gradient tail it sends */
	uint32_t *idx;
	int idx_cap;
	double loss;
	int local_steps;  /* localsgd / easgd: steps since the last exchange */
	int n_held;       /* its gradients held at the server ("where": "server") */
	float *ms, *wprev, *tmp; /* odsgd cadcasgd local optimiser state */
	wstate st;
	double due;       /* virtual: when its pending event fires */
	pthread_t th;
	int thread_live;  /* wall: a thread was started and not yet joined */
	int exited;       /* wall: ... and it has left its loop */
	int pending;      /* virtual: a START or ARRIVE event is queued */
	/* statistics */
	uint64_t iterations, samples;
	double bytes_sent, flops, flops_saved;
	double active_s, t_joined;
	stale_hist hist;
	age_hist age;
} worker;

/* a gradient held at the server until it is old enough ("where": "server") */
typedef struct held {
	double due, t_read;
	int worker;
	uint64_t v_read, seq;
	size_t off;
	int batch;
	double loss;
	float *g;
	float *bak;   /* dcasgd: the weights g was computed on (else NULL) */
} held;

/* virtual clock event */
typedef struct vevent {
	double t;
	uint64_t seq;
	int worker;
	int kind;
} vevent;
enum { EV_START, EV_ARRIVE, EV_HELD };

struct run {
	run_config cfg;
	const dataset_pair *data;
	run_callbacks cb;
	int virt;
	int ncpu;
	backend *be_ps;   /* parameter server arithmetic (one thread) */
	backend *be_eval; /* evaluation; all compute on the virtual clock */
	model *evm;
	ps *ps;
	rule_kind rule;
	size_t n_params;
	double full_flops; /* per sample, full depth */
	worker *w[CFG_MAX_WORKERS];
	int n_slots;
	/* sampler: one permutation per epoch, shared by all workers */
	uint32_t *perm;
	uint32_t pos;
	uint64_t shuffles;
	rng shuf;
	uint64_t taken, take_limit;
	uint64_t clock_gap_max;
	/* progress */
	uint64_t samples, updates;
	double loss_sum;
	long loss_n;
	stale_hist hist;
	age_hist age;
	uint64_t win_tau[WINDOW_N];
	double win_t[WINDOW_N];
	int win_pos, win_n;
	/* version-delay history */
	float *vh[VHIST_MAX];
	uint64_t vh_v[VHIST_MAX];
	int vh_depth;
	/* held gradients (server-side delay) */
	held *held;
	int n_held, cap_held;
	/* time */
	double t0;        /* wall start */
	double t_base;    /* run seconds before t0 (a resumed run) */
	int ckpt_req;     /* run_checkpoint() waits for the loop */
	blob ckpt;
	int exec_live;    /* run_exec() is running the loop */
	int restored;     /* state loaded from a checkpoint */
	double vtime;     /* virtual now */
	double eval_s;    /* wall seconds spent evaluating */
	/* evaluation */
	uint64_t next_eval_v;
	uint64_t epochs_done;
	double best_acc, last_acc, last_test_loss, last_train_loss;
	run_eval *series;
	int n_series, cap_series;
	/* control */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_mutex_t qmu;
	run_cmd *q;
	int n_q, cap_q;
	run_sched *sched;
	int n_sched, sched_pos;
	atomic_int stop_req;
	int stopping, paused, eval_gate, n_computing;
	int hog_inflight; /* hogwild steps between their check and their count */
	int fail_rc;      /* the run failed (negative SL_E* code; r->err says why) */
	run_state state;
	const char *stop_reason;
	/* virtual events */
	vevent *ev;
	int n_ev, cap_ev;
	uint64_t ev_seq;
	/* snapshots */
	pthread_mutex_t smu;
	run_snapshot *snap;
	double last_snap, last_progress;
	char err[SL_ERR_LEN];
};

const char *
run_state_name(run_state s)
{
	static const char *const n[] = {"starting", "running", "paused",
					"finished", "failed"};
	return (unsigned)s < 5 ? n[s] : "?";
}

static double
wall(const run *r)
{
	return sl_now() - r->t0 + r->t_base;
}

/* run time: wall seconds, or virtual seconds */
static double
now(const run *r)
{
	return r->virt ? r->vtime : wall(r);
}

static double
train_seconds(const run *r)
{
	double t = wall(r) - r->eval_s;
	return t > 0 ? t : 0;
}

/* ---- helpers ----------------------------------------------------------- */

static int
n_running(const run *r)
{
	int n = 0;
	for (int i = 0; i < r->n_slots; i++)
		n += r->w[i]->active && !r->w[i]->paused;
	return n;
}

static int
round_size(const run *r)
{
	int n = n_running(r);
	if (r->rule == RULE_SOFTSYNC) {
		int c = (int)((double)n / r->cfg.rp.n);
		return c < 1 ? 1 : c;
	}
	return n < 1 ? 1 : n;
}

static uint64_t
min_clock(const run *r)
{
	uint64_t m = UINT64_MAX;
	for (int i = 0; i < r->n_slots; i++) {
		const worker *w = r->w[i];
		if (w->active && !w->paused && w->clock < m)
			m = w->clock;
	}
	return m;
}

static void
window_add(run *r, uint64_t tau)
{
	r->win_tau[r->win_pos] = tau;
	r->win_t[r->win_pos] = now(r);
	r->win_pos = (r->win_pos + 1) % WINDOW_N;
	if (r->win_n < WINDOW_N)
		r->win_n++;
}

static void
record_stale(run *r, worker *w, uint64_t tau, double t_read)
{
	double ms = (now(r) - t_read) * 1e3;
	stale_add(&r->hist, tau);
	stale_add(&w->hist, tau);
	age_add(&r->age, ms);
	age_add(&w->age, ms);
	window_add(r, tau);
}

/* a worker starts an iteration: track the widest clock gap (SSP) */
static void
note_begin(run *r, const worker *w)
{
	uint64_t mc = min_clock(r);
	if (mc != UINT64_MAX && w->clock > mc && w->clock - mc > r->clock_gap_max)
		r->clock_gap_max = w->clock - mc;
}

/* take up to want sample indices; 0 when the stop limit is reached */
static int
sampler_take(run *r, int want, uint32_t *idx)
{
	const uint32_t n = r->data->train.n;
	int got = 0;
	if (r->take_limit && r->taken >= r->take_limit)
		return 0;
	if (r->take_limit && r->taken + (uint64_t)want > r->take_limit)
		want = (int)(r->take_limit - r->taken);
	if (r->pos >= n) {
		for (uint32_t i = 0; i < n; i++)
			r->perm[i] = i;
		rng_seed(&r->shuf, r->cfg.seed, 1000 + r->shuffles);
		rng_shuffle(&r->shuf, r->perm, n);
		r->shuffles++;
		r->pos = 0;
	}
	/* a batch never straddles an epoch: the last one may be short */
	while (got < want && r->pos < n)
		idx[got++] = r->perm[r->pos++];
	r->taken += (uint64_t)got;
	return got;
}

/* ---- workers ------------------------------------------------------------ */

static void
worker_free(worker *w)
{
	if (!w)
		return;
	backend *be = w->be;
	if (w->m) {
		be->ops->free(be, w->ms);
		be->ops->free(be, w->wprev);
		be->ops->free(be, w->tmp);
	}
	model_free(w->m);
	free(w->idx);
	free(w);
}

/* make the worker's settings those of cfg (override for its id, if any) */
static void
worker_settings(run *r, worker *w)
{
	w->delay = r->cfg.delay;
	w->spb_depth = 0;
	w->speed = 1.0;
	w->paused = 0;
	for (int i = 0; i < r->cfg.n_overrides; i++) {
		const worker_override *o = &r->cfg.overrides[i];
		if (o->id != w->id)
			continue;
		if (o->has_delay)
			w->delay = o->delay;
		if (o->has_spb)
			w->spb_depth = o->spb_depth;
		if (o->has_speed)
			w->speed = o->speed;
		if (o->has_paused)
			w->paused = o->paused;
	}
}

static int
worker_new(run *r, int id, worker **out)
{
	*out = NULL;
	worker *w = calloc(1, sizeof(*w));
	if (!w)
		return sl_fail(r->err, SL_ENOMEM, "out of memory");
	w->id = id;
	w->have = UINT64_MAX;
	w->last_round = -1;
	rng_seed(&w->rng_delay, r->cfg.seed, 100 + (uint64_t)id);
	if (r->virt) {
		w->be = r->be_eval;
	} else {
		/* as wide as the machine (or threads); narrowed to one thread
		 * while other workers share the cores (fit_threads) */
		int t = r->cfg.threads ? r->cfg.threads : r->ncpu;
		if (backend_cpu_new(t, &w->be) < 0) {
			free(w);
			return sl_fail(r->err, SL_ENOMEM, "workers: cannot start a backend");
		}
	}
	const dataset *tr = &r->data->train;
	int rc = model_new(r->cfg.model, tr->c, tr->h, tr->w, tr->classes,
			   r->cfg.batch, r->cfg.seed, w->be, &w->m, r->err);
	w->idx_cap = r->cfg.batch;
	w->idx = malloc(sizeof(uint32_t) * (size_t)w->idx_cap);
	if (rc < 0 || !w->idx) {
		if (!r->virt)
			backend_free(w->be);
		free(w->idx);
		model_free(w->m);
		free(w);
		return rc < 0 ? rc : sl_fail(r->err, SL_ENOMEM, "out of memory");
	}
	worker_settings(r, w);
	w->t_joined = now(r);
	*out = w;
	return 0;
}

static void
worker_destroy(run *r, worker *w)
{
	backend *be = w->be;
	worker_free(w);
	if (!r->virt)
		backend_free(be);
}

/* may the worker start an iteration now? */
static int
can_begin(const run *r, const worker *w)
{
	if (!w->active || w->paused || r->paused || r->stopping)
		return 0;
	if (w->waiting && ps_version(r->ps) <= w->wait_v)
		return 0;
	if (r->rule == RULE_SSP) {
		uint64_t mc = min_clock(r);
		if (mc != UINT64_MAX && w->clock > mc + (uint64_t)r->cfg.rp.s)
			return 0;
	}
	if (r->take_limit && r->taken >= r->take_limit)
		return 0;
	/* a worker far ahead of its held gradients waits (bounded memory) */
	if (w->n_held >= HELD_MAX)
		return 0;
	return 1;
}

/* odsgd after warm-up: a worker pushes once per round */
static int
odsgd_local(const run *r, const worker *w)
{
	return r->rule == RULE_ODSGD && w->clock >= (uint64_t)r->cfg.rp.warmup;
}

static int
can_push(const run *r, const worker *w)
{
	if (odsgd_local(r, w) && w->last_round >= 0 &&
	    (uint64_t)w->last_round >= ps_version(r->ps))
		return 0;
	return 1;
}

static int
local_rule(rule_kind k)
{
	return k == RULE_LOCALSGD || k == RULE_EASGD;
}

/* Is the worker's gradient held at the server ("where": "server") while
 * the worker moves on? Only where the rule lets a worker move on before
 * its gradient lands. ssgd and odsgd wait for their round (odsgd's local
 * step needs the gradient too) and local rules exchange models, so there
 * a server-held delay is a delay of the arrival like a worker-side one:
 * it never changes the rule's semantics. */
static int
held_at_server(const run *r, const worker *w)
{
	return w->delay.at_server && !local_rule(r->rule) &&
	       r->rule != RULE_SSGD && r->rule != RULE_ODSGD;
}

/* may another update be applied? (a stop counted in updates stops at
 * exactly that update, whatever is in flight) */
static int
steps_left(const run *r)
{
	return !r->cfg.stop_steps || ps_version(r->ps) < r->cfg.stop_steps;
}

/* The run cannot go on (lock held): say why in r->err, stop it; run_exec
 * returns the code and the state becomes "failed". Returns code. */
static int
fail_run(run *r, int code, const char *why)
{
	if (!r->fail_rc) {
		r->fail_rc = code;
		snprintf(r->err, sizeof(r->err), "%s", why);
	}
	r->stopping = 1;
	pthread_cond_broadcast(&r->cv);
	return code;
}

/* version-delay history: keep a copy of the weights at each version */
static void
vhist_record(run *r)
{
	if (!r->vh_depth)
		return;
	uint64_t v = ps_version(r->ps);
	int slot = (int)(v % (uint64_t)r->vh_depth);
	r->be_ps->ops->copy(r->be_ps, r->vh[slot], ps_weights(r->ps),
			    sizeof(float) * r->n_params);
	r->vh_v[slot] = v;
}

/* fetch the weights this iteration computes on (lock held) */
static void
pull(run *r, worker *w)
{
	backend *be = w->be;
	w->t_read = now(r);
	/* the depth is fixed for this step: a change lands on the next one */
	w->depth = w->spb_depth;
	/* so is the team's width (the worker's own thread, between steps) */
	if (w->want_threads && w->want_threads != w->cur_threads &&
	    be->ops->set_threads) {
		be->ops->set_threads(be, w->want_threads);
		w->cur_threads = w->want_threads;
	}
	w->grad_off = model_tail_offset(w->m, w->depth);
	if (r->rule == RULE_HOGWILD) {
		w->v_read = ps_version(r->ps);
		return; /* computes on the shared weights directly */
	}
	if (local_rule(r->rule) || odsgd_local(r, w)) {
		/* local weights; first iteration (or after a rule switch)
		 * starts from the server's */
		if (w->have == UINT64_MAX)
			ps_pull(r->ps, w->id, w->m->params, &w->have);
		if (!odsgd_local(r, w))
			w->v_read = ps_version(r->ps);
		return;
	}
	int lag = delay_draw_version(&w->delay, &w->rng_delay);
	uint64_t v = ps_version(r->ps);
	if (lag > 0 && r->vh_depth) {
		uint64_t target = (uint64_t)lag > v ? 0 : v - (uint64_t)lag;
		int slot = (int)(target % (uint64_t)r->vh_depth);
		if (r->vh_v[slot] == target && lag < r->vh_depth) {
			/* a stale read: the weights of version `target`, which
			 * DC-ASGD's compensation must also see */
			ps_pull_old(r->ps, w->id, r->vh[slot], target,
				    w->m->params, &w->have);
			w->v_read = target;
			return;
		}
	}
	ps_pull(r->ps, w->id, w->m->params, &w->have);
	w->v_read = w->have;
}

/* forward + backward on the loaded batch; returns compute FLOPs */
static double
compute(run *r, worker *w)
{
	const float *p = r->rule == RULE_HOGWILD ? ps_weights(r->ps) : w->m->params;
	model_load_batch(w->m, r->data->train.x, r->data->train.y, w->idx,
			 w->batch_n);
	w->loss = model_step(w->m, p, w->batch_n, w->depth);
	double f = model_step_flops(w->m, w->depth) * w->batch_n;
	w->flops += f;
	w->flops_saved += r->full_flops * w->batch_n - f;
	return f;
}

static void
after_version_change(run *r)
{
	vhist_record(r);
	r->updates++;
}

/* a gradient delivered: the counters every push path shares */
static void
count_delivery(run *r, worker *w)
{
	w->seq++;
	w->bytes_sent += (double)(r->n_params - w->grad_off) * sizeof(float);
	r->loss_sum += w->loss;
	r->loss_n++;
	r->samples += (uint64_t)w->batch_n;
	w->samples += (uint64_t)w->batch_n;
	w->iterations++;
}

/* deliver the worker's gradient (lock held; can_push true). */
static void
push(run *r, worker *w)
{
	backend *be = w->be;
	size_t off = w->grad_off;
	uint64_t v0 = ps_version(r->ps);
	uint64_t tau = 0;
	count_delivery(r, w);
	if (local_rule(r->rule)) {
		/* local step on the worker's own weights */
		be->ops->sgd(be, w->m->params + off, w->m->grads + off, NULL,
			     r->n_params - off, (float)r->cfg.lr, 0, 0);
		tau = (uint64_t)w->local_steps;
		w->local_steps++;
		if (r->rule == RULE_LOCALSGD &&
		    w->local_steps >= (int)r->cfg.rp.H) {
			w->local_steps = 0;
			w->waiting = 1;
			w->wait_v = v0;
			w->have = UINT64_MAX; /* take the average when released */
			if (ps_average_push(r->ps, w->m->params, n_running(r)))
				after_version_change(r);
		} else if (r->rule == RULE_EASGD &&
			   w->local_steps >= (int)r->cfg.rp.period) {
			w->local_steps = 0;
			int n = n_running(r);
			ps_elastic(r->ps, w->m->params,
				   (float)(r->cfg.rp.beta / (n < 1 ? 1 : n)));
			after_version_change(r);
		}
	} else if (odsgd_local(r, w)) {
		ps_grad g = {.worker = w->id, .seq = w->seq, .v_read = w->v_read,
			     .off = off, .batch = w->batch_n, .g = w->m->grads};
		ps_result res;
		/* local update from the newest global weights W(R), which
		 * the pending round R will advance */
		uint64_t R = ps_version(r->ps);
		float *x = w->m->params;
		const float *W = ps_weights(r->ps);
		int n = n_running(r);
		float llr = (float)(r->cfg.rp.local_lr / (n < 1 ? 1 : n));
		if (!strcmp(r->cfg.rp.local_opt, "cadcasgd") && !w->ms) {
			w->ms = be->ops->alloc(be, sizeof(float) * r->n_params);
			w->wprev = be->ops->alloc(be, sizeof(float) * r->n_params);
			w->tmp = be->ops->alloc(be, sizeof(float) * r->n_params);
			if (w->wprev)
				be->ops->copy(be, w->wprev, W, sizeof(float) * r->n_params);
		}
		be->ops->copy(be, x, W, sizeof(float) * r->n_params);
		if (w->ms && w->wprev && w->tmp &&
		    !strcmp(r->cfg.rp.local_opt, "cadcasgd")) {
			/* compensated local step (CADCASGD): the drift is the last
			 * global step this worker saw, W - W_prev */
			be->ops->dc_grad(be, r->n_params - off, w->m->grads + off,
					 W + off, w->wprev + off, w->ms + off,
					 (float)r->cfg.rp.lambda, (float)r->cfg.rp.m,
					 1e-7f, w->tmp + off);
			be->ops->sgd(be, x + off, w->tmp + off, NULL, r->n_params - off,
				     llr, 0, 0);
			be->ops->copy(be, w->wprev, W, sizeof(float) * r->n_params);
		} else {
			be->ops->sgd(be, x + off, w->m->grads + off, NULL,
				     r->n_params - off, llr, 0, 0);
		}
		/* push after the local step: the round may complete now and
		 * move W on to W(R+1) */
		ps_push(r->ps, &g, round_size(r), &res);
		tau = res.tau;
		w->have = R;      /* global part of the local weights */
		w->v_read = R;
		w->last_round = (int64_t)R;
		if (res.applied)
			after_version_change(r);
	} else {
		ps_grad g = {.worker = w->id, .seq = w->seq, .v_read = w->v_read,
			     .off = off, .batch = w->batch_n, .g = w->m->grads};
		ps_result res;
		ps_push(r->ps, &g, round_size(r), &res);
		tau = res.tau;
		if (r->rule == RULE_SSGD || r->rule == RULE_ODSGD) {
			/* wait for the round (odsgd warm-up is plain ssgd) */
			if (!res.applied) {
				w->waiting = 1;
				w->wait_v = v0;
			}
		}
		if (res.applied)
			after_version_change(r);
	}
	w->clock++;
	record_stale(r, w, tau, w->t_read);
}

/* hold a gradient at the server until it is old enough; a failed
 * allocation fails the run (a dropped gradient would go unnoticed) */
static int
hold(run *r, worker *w, double due)
{
	if (r->n_held == r->cap_held) {
		int cap = r->cap_held ? 2 * r->cap_held : 16;
		held *h = realloc(r->held, sizeof(held) * (size_t)cap);
		if (!h)
			return fail_run(r, -SL_ENOMEM,
					"out of memory holding a gradient at the server");
		r->held = h;
		r->cap_held = cap;
	}
	size_t off = w->grad_off;
	held *h = &r->held[r->n_held];
	/* DC-ASGD compensates with the weights this gradient was computed
	 * on: the worker's backup now, before its next pull replaces it */
	const float *bak = r->rule == RULE_DCASGD ? ps_backup(r->ps, w->id) : NULL;
	h->g = malloc(sizeof(float) * r->n_params);
	h->bak = bak ? malloc(sizeof(float) * r->n_params) : NULL;
	if (!h->g || (bak && !h->bak)) {
		free(h->g);
		free(h->bak);
		return fail_run(r, -SL_ENOMEM,
				"out of memory holding a gradient at the server");
	}
	memcpy(h->g + off, w->m->grads + off, sizeof(float) * (r->n_params - off));
	if (bak)
		r->be_ps->ops->download(r->be_ps, h->bak, bak,
					sizeof(float) * r->n_params);
	h->due = due;
	h->t_read = w->t_read;
	h->worker = w->id;
	h->v_read = w->v_read;
	h->seq = ++w->seq;
	h->off = off;
	h->batch = w->batch_n;
	h->loss = w->loss;
	r->n_held++;
	w->n_held++;
	w->clock++;
	w->iterations++;
	w->samples += (uint64_t)w->batch_n;
	w->bytes_sent += (double)(r->n_params - off) * sizeof(float);
	return 0;
}

/* apply held gradients that are due (all of them when force), in the
 * order they were held, never past a stop counted in updates */
static int
release_held(run *r, int force)
{
	int applied = 0;
	for (int i = 0; i < r->n_held && steps_left(r);) {
		held *h = &r->held[i];
		if (!force && h->due > now(r)) {
			i++;
			continue;
		}
		ps_grad g = {.worker = h->worker, .seq = h->seq, .v_read = h->v_read,
			     .off = h->off, .batch = h->batch, .g = h->g,
			     .bak = h->bak};
		ps_result res;
		ps_push(r->ps, &g, round_size(r), &res);
		r->samples += (uint64_t)h->batch;
		r->loss_sum += h->loss;
		r->loss_n++;
		record_stale(r, r->w[h->worker], res.tau, h->t_read);
		r->w[h->worker]->n_held--;
		if (res.applied)
			after_version_change(r);
		free(h->g);
		free(h->bak);
		/* keep the order: two gradients due at once land oldest first */
		memmove(&r->held[i], &r->held[i + 1],
			sizeof(held) * (size_t)(r->n_held - i - 1));
		r->n_held--;
		applied++;
	}
	return applied;
}

/* delay before the push, in seconds: injected delay, transfer time, and
 * the straggler's extra compute (compute_s at speed 1) */
static double
delay_s(worker *w, double compute_s, double bytes)
{
	double ms = delay_draw_ms(&w->delay, &w->rng_delay) +
		    delay_transfer_ms(&w->delay, bytes);
	double extra = w->speed > 0 ? compute_s * (1.0 / w->speed - 1.0) : 0;
	return ms * 1e-3 + (extra > 0 ? extra : 0);
}

/* ---- evaluation, stop, snapshots ------------------------------------- */

#define SERIES_MAX 16384 /* evaluation records kept per run */

static void
series_add(run *r, const run_eval *e)
{
	if (r->n_series == SERIES_MAX) {
		/* a long run: thin the older half to every other record, so the
		 * whole curve stays, at half the resolution where it is oldest */
		int half = SERIES_MAX / 2, k = 0;
		for (int i = 0; i < half; i += 2)
			r->series[k++] = r->series[i];
		memmove(r->series + k, r->series + half,
			sizeof(run_eval) * (size_t)(SERIES_MAX - half));
		r->n_series = k + SERIES_MAX - half;
	}
	if (r->n_series == r->cap_series) {
		int cap = r->cap_series ? 2 * r->cap_series : 64;
		run_eval *s = realloc(r->series, sizeof(run_eval) * (size_t)cap);
		if (!s)
			return;
		r->series = s;
		r->cap_series = cap;
	}
	r->series[r->n_series++] = *e;
}

static void
fill_eval(run *r, run_eval *e)
{
	memset(e, 0, sizeof(*e));
	e->t = now(r);
	e->v = ps_version(r->ps);
	e->samples = r->samples;
	e->epoch = (double)r->samples / r->data->train.n;
	e->train_s = train_seconds(r);
	e->samples_per_s = e->train_s > 0 ? r->samples / e->train_s : 0;
	e->updates_per_s = e->train_s > 0 ? r->updates / e->train_s : 0;
	e->stale = r->hist;
	e->age = r->age;
	e->best_acc = r->best_acc;
	e->test_acc = r->last_acc;
	e->test_loss = r->last_test_loss;
	e->train_loss = r->last_train_loss;
}

/* evaluate the server's weights (lock held on entry and exit; on the wall
 * clock the lock is dropped while evaluating and workers are gated) */
static void
evaluate(run *r)
{
	double t_start = sl_now();
	if (!r->virt) {
		r->eval_gate = 1;
		while (r->n_computing > 0)
			pthread_cond_wait(&r->cv, &r->mu);
		t_start = sl_now();
	}
	r->be_eval->ops->copy(r->be_eval, r->evm->params, ps_weights(r->ps),
			      sizeof(float) * r->n_params);
	run_eval e;
	r->last_train_loss = r->loss_n ? r->loss_sum / r->loss_n : NAN;
	r->loss_sum = 0;
	r->loss_n = 0;
	if (!r->virt)
		pthread_mutex_unlock(&r->mu);
	double loss, acc;
	model_evaluate(r->evm, NULL, &r->data->test, &loss, &acc);
	if (!r->virt) {
		pthread_mutex_lock(&r->mu);
		r->eval_gate = 0;
		pthread_cond_broadcast(&r->cv);
	}
	r->eval_s += sl_now() - t_start;
	r->last_acc = acc;
	r->last_test_loss = loss;
	if (acc > r->best_acc)
		r->best_acc = acc;
	fill_eval(r, &e);
	series_add(r, &e);
	if (r->cb.eval)
		r->cb.eval(r->cb.ud, &e);
}

static int
stop_met(run *r)
{
	const run_config *c = &r->cfg;
	const double n = r->data->train.n;
	if (r->fail_rc) {
		r->stop_reason = "failed";
		return 1;
	}
	if (atomic_load(&r->stop_req)) {
		r->stop_reason = "stopped";
		return 1;
	}
	if (c->stop_steps && ps_version(r->ps) >= c->stop_steps) {
		r->stop_reason = "steps";
		return 1;
	}
	if (c->stop_epochs > 0 && r->samples >= c->stop_epochs * n - 0.5) {
		r->stop_reason = "epochs";
		return 1;
	}
	double t = r->virt ? now(r) : train_seconds(r);
	if (c->stop_seconds > 0 && t >= c->stop_seconds) {
		r->stop_reason = "seconds";
		return 1;
	}
	if (c->stop_target_acc > 0 && r->best_acc >= c->stop_target_acc) {
		r->stop_reason = "target_acc";
		return 1;
	}
	return 0;
}

/* evaluation due after progress? (every eval_every updates, each epoch) */
static int
eval_due(run *r)
{
	uint64_t epochs = r->samples / r->data->train.n;
	if (epochs > r->epochs_done) {
		r->epochs_done = epochs;
		return 1;
	}
	if (r->cfg.eval_every > 0 && ps_version(r->ps) >= r->next_eval_v) {
		uint64_t e = (uint64_t)r->cfg.eval_every;
		r->next_eval_v = (ps_version(r->ps) / e + 1) * e;
		return 1;
	}
	return 0;
}

static run_snapshot *
build_snapshot(run *r)
{
	run_snapshot *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->workers = calloc((size_t)(r->n_slots ? r->n_slots : 1), sizeof(worker_snap));
	if (!s->workers) {
		free(s);
		return NULL;
	}
	s->refs = 1;
	s->state = r->state;
	s->cfg = r->cfg;
	s->t = now(r);
	s->train_s = train_seconds(r);
	s->v = ps_version(r->ps);
	s->samples = r->samples;
	s->epoch = (double)r->samples / r->data->train.n;
	s->samples_per_s = s->train_s > 0 ? r->samples / s->train_s : 0;
	s->updates_per_s = s->train_s > 0 ? r->updates / s->train_s : 0;
	s->last_loss = r->loss_n ? r->loss_sum / r->loss_n : r->last_train_loss;
	s->test_acc = r->last_acc;
	s->best_acc = r->best_acc;
	s->stale = r->hist;
	s->age = r->age;
	s->stop_reason = r->stop_reason;
	if (r->fail_rc)
		snprintf(s->error, sizeof(s->error), "%s", r->err);
	s->clock_gap_max = r->clock_gap_max;
	double tnow = now(r);
	for (int i = 0; i < r->win_n; i++) {
		int j = (r->win_pos - 1 - i + WINDOW_N) % WINDOW_N;
		if (tnow - r->win_t[j] > WINDOW_S)
			break;
		stale_add(&s->window, r->win_tau[j]);
	}
	for (int i = 0; i < r->n_slots; i++) {
		const worker *w = r->w[i];
		if (!w->active)
			continue;
		worker_snap *ws = &s->workers[s->n_workers++];
		ws->id = w->id;
		ws->state = w->paused ? "paused"
			    : w->st == W_DELAY ? "delayed"
			    : (w->st == W_WAIT_BEGIN || w->st == W_WAIT_PUSH) ? "waiting"
			    : "running";
		ws->delay = w->delay;
		ws->spb_depth = w->spb_depth;
		ws->speed = w->speed;
		ws->iterations = w->iterations;
		ws->samples = w->samples;
		ws->staleness_mean = stale_mean(&w->hist);
		double up = (r->virt ? tnow : s->train_s) - w->t_joined;
		ws->samples_per_s = up > 0 ? w->samples / up : 0;
		ws->bytes_sent = w->bytes_sent;
		ws->flops = w->flops;
		ws->flops_saved = w->flops_saved;
		ws->stale = w->hist;
		ws->age = w->age;
	}
	return s;
}

static void
publish(run *r)
{
	run_snapshot *s = build_snapshot(r);
	if (!s)
		return;
	pthread_mutex_lock(&r->smu);
	run_snapshot *old = r->snap;
	r->snap = s;
	pthread_mutex_unlock(&r->smu);
	run_snapshot_put(old);
	r->last_snap = sl_now();
}

run_snapshot *
run_snapshot_get(run *r)
{
	pthread_mutex_lock(&r->smu);
	run_snapshot *s = r->snap;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&r->smu);
	return s;
}

void
run_snapshot_put(run_snapshot *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		free(s->workers);
		free(s);
	}
}

size_t
run_weights(run *r, float *out, size_t max)
{
	if (max < r->n_params)
		return 0;
	pthread_mutex_lock(&r->mu);
	r->be_ps->ops->download(r->be_ps, out, ps_weights(r->ps),
				sizeof(float) * r->n_params);
	pthread_mutex_unlock(&r->mu);
	return r->n_params;
}

int
run_series(run *r, uint64_t since, run_eval *out, int max)
{
	int n = 0;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n_series && n < max; i++)
		if (r->series[i].v > since || (since == 0 && i == 0))
			out[n++] = r->series[i];
	pthread_mutex_unlock(&r->mu);
	return n;
}

/* ---- commands ------------------------------------------------------------ */

static int
check_cmd(const run *r, const run_cmd *c, char *err)
{
	if (c->worker >= CFG_MAX_WORKERS)
		return sl_fail(err, SL_EINVAL, "worker: id %d out of range", c->worker);
	if (c->worker >= 0 && (c->worker >= r->cfg.workers))
		return sl_fail(err, SL_EINVAL, "worker: no worker %d (the run has %d)",
			       c->worker, r->cfg.workers);
	if ((c->fields & CMD_RULE) && rule_from_name(c->rule) < 0)
		return sl_fail(err, SL_EINVAL, "rule: unknown \"%s\"", c->rule);
	if ((c->fields & CMD_RULE) && !strcmp(c->rule, "hogwild") && r->virt)
		return sl_fail(err, SL_EINVAL,
			       "rule: hogwild needs threads (the wall clock)");
	if ((c->fields & CMD_LR) && !(c->lr > 0 && c->lr <= 100))
		return sl_fail(err, SL_EINVAL, "lr: must be in (0, 100]");
	if ((c->fields & CMD_MOMENTUM) && !(c->momentum >= 0 && c->momentum < 1))
		return sl_fail(err, SL_EINVAL, "momentum: must be in [0, 1)");
	if ((c->fields & CMD_BATCH) && (c->batch < 1 || c->batch > r->cfg.batch))
		return sl_fail(err, SL_EINVAL,
			       "batch: must be in 1..%d (the run's starting batch)",
			       r->cfg.batch);
	if ((c->fields & CMD_WORKERS) && (c->workers < 1 || c->workers > CFG_MAX_WORKERS))
		return sl_fail(err, SL_EINVAL, "workers: must be in 1..%d", CFG_MAX_WORKERS);
	if ((c->fields & CMD_SPB) && (c->spb_depth < 0 || c->spb_depth > 64))
		return sl_fail(err, SL_EINVAL, "spb_depth: must be in 0..64");
	if ((c->fields & CMD_SPEED) && !(c->speed > 0 && c->speed <= 100))
		return sl_fail(err, SL_EINVAL, "speed: must be in (0, 100]");
	if ((c->fields & CMD_DELAY) && c->delay.dist == DELAY_VERSION &&
	    c->delay.s >= VHIST_MAX)
		return sl_fail(err, SL_EINVAL, "delay.s: at most %d", VHIST_MAX - 1);
	return 0;
}

int
run_command(run *r, const run_cmd *c, char *err)
{
	int rc = check_cmd(r, c, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&r->qmu);
	if (r->n_q == r->cap_q) {
		int cap = r->cap_q ? 2 * r->cap_q : 16;
		run_cmd *q = realloc(r->q, sizeof(run_cmd) * (size_t)cap);
		if (!q) {
			pthread_mutex_unlock(&r->qmu);
			return sl_fail(err, SL_ENOMEM, "out of memory");
		}
		r->q = q;
		r->cap_q = cap;
	}
	r->q[r->n_q++] = *c;
	pthread_mutex_unlock(&r->qmu);
	pthread_mutex_lock(&r->mu);
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static void *worker_main(void *p);
static void after_push_wall(run *r);
static void save_state(run *r, blob *b);
static void serve_checkpoint(run *r);

struct wargs {
	run *r;
	worker *w;
};

static int
start_thread(run *r, worker *w)
{
	if (r->virt)
		return 0;
	if (w->thread_live) {
		if (!w->exited)
			return 0; /* still in its loop: it sees active again */
		/* it left (it released the lock for good): reap it */
		pthread_join(w->th, NULL);
		w->thread_live = 0;
	}
	w->exited = 0;
	struct wargs *a = malloc(sizeof(*a));
	if (!a)
		return -SL_ENOMEM;
	a->r = r;
	a->w = w;
	if (pthread_create(&w->th, NULL, worker_main, a)) {
		free(a);
		return -SL_ENOMEM;
	}
	w->thread_live = 1;
	return 0;
}

static void schedule(run *r, double t, int wid, int kind);

/* wall clock: a lone running worker uses its whole team, several use one
 * thread each (lock held; takes effect at each worker's next step) */
static void
fit_threads(run *r)
{
	if (r->virt || r->cfg.threads)
		return;
	int n = n_running(r);
	for (int i = 0; i < r->n_slots; i++)
		r->w[i]->want_threads = n <= 1 ? r->ncpu : 1;
}

/* set the worker count (lock held) */
static void
set_workers(run *r, int n)
{
	for (int i = 0; i < n; i++) {
		if (i >= r->n_slots) {
			worker *w;
			if (worker_new(r, i, &w) < 0)
				break;
			r->w[i] = w;
			r->n_slots = i + 1;
		}
		worker *w = r->w[i];
		if (!w->active) {
			w->active = 1;
			w->st = W_IDLE;
			w->t_joined = now(r);
			w->have = UINT64_MAX;
			w->waiting = 0;
			w->clock = min_clock(r) == UINT64_MAX ? 0 : min_clock(r);
			if (r->virt) {
				if (!w->pending)
					schedule(r, now(r), i, EV_START);
			} else {
				start_thread(r, w);
			}
		}
	}
	for (int i = n; i < r->n_slots; i++)
		r->w[i]->active = 0; /* leaves after its current iteration */
	r->cfg.workers = n;
	fit_threads(r);
	/* a sync round may be complete with fewer workers */
	if (ps_flush_round(r->ps, round_size(r)))
		after_version_change(r);
}

static void
apply_rule(run *r, const char *name, const rule_params *rp)
{
	int k = rule_from_name(name);
	if (k < 0)
		return;
	snprintf(r->cfg.rule, sizeof(r->cfg.rule), "%s", name);
	if (rp)
		r->cfg.rp = *rp;
	r->rule = (rule_kind)k;
	ps_set_rule(r->ps, r->rule, &r->cfg.rp);
	for (int i = 0; i < r->n_slots; i++) {
		worker *w = r->w[i];
		w->waiting = 0;
		w->have = UINT64_MAX; /* re-read the server's weights */
		w->last_round = -1;
		w->local_steps = 0;
	}
}

static void
override_set(run *r, const run_cmd *c)
{
	worker_override *o = NULL;
	for (int i = 0; i < r->cfg.n_overrides; i++)
		if (r->cfg.overrides[i].id == c->worker)
			o = &r->cfg.overrides[i];
	if (!o && r->cfg.n_overrides < CFG_MAX_OVERRIDES) {
		o = &r->cfg.overrides[r->cfg.n_overrides++];
		memset(o, 0, sizeof(*o));
		o->id = c->worker;
	}
	if (!o)
		return;
	if (c->fields & CMD_DELAY) {
		o->has_delay = 1;
		o->delay = c->delay;
	}
	if (c->fields & CMD_SPB) {
		o->has_spb = 1;
		o->spb_depth = c->spb_depth;
	}
	if (c->fields & CMD_SPEED) {
		o->has_speed = 1;
		o->speed = c->speed;
	}
	if (c->fields & CMD_PAUSED) {
		o->has_paused = 1;
		o->paused = c->paused;
	}
}

static int
need_vhist(const run *r)
{
	int d = 0;
	for (int i = 0; i < r->n_slots; i++)
		if (r->w[i]->delay.dist == DELAY_VERSION && r->w[i]->delay.s + 1 > d)
			d = r->w[i]->delay.s + 1;
	if (r->cfg.delay.dist == DELAY_VERSION && r->cfg.delay.s + 1 > d)
		d = r->cfg.delay.s + 1;
	return d > VHIST_MAX ? VHIST_MAX : d;
}

static void
ensure_vhist(run *r)
{
	int d = need_vhist(r);
	for (int i = r->vh_depth; i < d; i++) {
		r->vh[i] = r->be_ps->ops->alloc(r->be_ps, sizeof(float) * r->n_params);
		if (!r->vh[i]) {
			d = i;
			break;
		}
		r->vh_v[i] = UINT64_MAX;
	}
	if (d > r->vh_depth) {
		r->vh_depth = d;
		for (int i = 0; i < d; i++)
			r->vh_v[i] = UINT64_MAX;
		vhist_record(r);
	}
}

/* apply one change (lock held) and report it */
static void
apply_cmd(run *r, const run_cmd *c)
{
	if (c->worker >= 0) {
		if (c->worker >= r->n_slots)
			return;
		worker *w = r->w[c->worker];
		if (c->fields & CMD_DELAY)
			w->delay = c->delay;
		if (c->fields & CMD_SPB)
			w->spb_depth = c->spb_depth;
		if (c->fields & CMD_SPEED)
			w->speed = c->speed;
		if (c->fields & CMD_PAUSED) {
			w->paused = c->paused;
			if (ps_flush_round(r->ps, round_size(r)))
				after_version_change(r);
			fit_threads(r);
		}
		override_set(r, c);
	} else {
		if (c->fields & CMD_RULE)
			apply_rule(r, c->rule, (c->fields & CMD_RULE_PARAMS) ? &c->rp : NULL);
		else if (c->fields & CMD_RULE_PARAMS) {
			r->cfg.rp = c->rp;
			ps_set_rule(r->ps, r->rule, &r->cfg.rp);
		}
		if (c->fields & (CMD_LR | CMD_MOMENTUM | CMD_WEIGHT_DECAY)) {
			if (c->fields & CMD_LR)
				r->cfg.lr = c->lr;
			if (c->fields & CMD_MOMENTUM)
				r->cfg.momentum = c->momentum;
			if (c->fields & CMD_WEIGHT_DECAY)
				r->cfg.weight_decay = c->weight_decay;
			ps_set_opt(r->ps, (float)r->cfg.lr, (float)r->cfg.momentum,
				   (float)r->cfg.weight_decay);
		}
		if (c->fields & CMD_BATCH)
			r->cfg.batch = c->batch;
		if (c->fields & CMD_EVAL_EVERY)
			r->cfg.eval_every = c->eval_every;
		if (c->fields & CMD_DELAY) {
			r->cfg.delay = c->delay;
			for (int i = 0; i < r->n_slots; i++)
				r->w[i]->delay = c->delay;
			r->cfg.n_overrides = 0;
		}
		if (c->fields & CMD_PAUSED) {
			r->paused = c->paused;
			r->state = c->paused ? RUN_PAUSED : RUN_RUNNING;
		}
		if (c->fields & CMD_WORKERS)
			set_workers(r, c->workers);
		if (c->fields & CMD_STOP)
			atomic_store(&r->stop_req, 1);
	}
	if (c->fields & CMD_DELAY)
		ensure_vhist(r);
	if (c->fields & CMD_CHECKPOINT) {
		blob b = {0};
		save_state(r, &b);
		if (r->cb.checkpoint)
			r->cb.checkpoint(r->cb.ud, c, b.oom ? NULL : b.p, b.oom ? 0 : b.n);
		blob_free(&b);
	}
	if (r->cb.change && (c->fields & ~(unsigned)CMD_CHECKPOINT))
		r->cb.change(r->cb.ud, now(r), ps_version(r->ps), c);
	pthread_cond_broadcast(&r->cv);
}

/* due schedule entries (lock held) */
static int
drain_schedule(run *r)
{
	int n = 0;
	while (r->sched_pos < r->n_sched) {
		const run_sched *s = &r->sched[r->sched_pos];
		if (s->by_version ? ps_version(r->ps) < s->v : now(r) < s->t)
			break;
		r->sched_pos++; /* counted first: a checkpoint taken by this
				 * entry must not fire it again on resume */
		apply_cmd(r, &s->cmd);
		n++;
	}
	return n;
}

/* queued commands and due schedule entries (lock held) */
static int
drain_commands(run *r)
{
	int n = drain_schedule(r);
	pthread_mutex_lock(&r->qmu);
	int nq = r->n_q;
	run_cmd *q = nq ? malloc(sizeof(run_cmd) * (size_t)nq) : NULL;
	if (q) {
		memcpy(q, r->q, sizeof(run_cmd) * (size_t)nq);
		r->n_q = 0;
	} else {
		nq = 0; /* out of memory: the queue waits for the next round */
	}
	pthread_mutex_unlock(&r->qmu);
	for (int i = 0; i < nq; i++)
		apply_cmd(r, &q[i]);
	free(q);
	return n + nq;
}

/* ---- wall clock ----------------------------------------------------------- */

static void
timed_wait(run *r, double seconds)
{
	struct timespec ts;
	sl_deadline(seconds, &ts);
	pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

static void *
worker_main(void *p)
{
	struct wargs a = *(struct wargs *)p;
	free(p);
	run *r = a.r;
	worker *w = a.w;
	pthread_mutex_lock(&r->mu);
	while (!r->stopping && w->active) {
		if (!can_begin(r, w) || r->eval_gate) {
			w->st = W_WAIT_BEGIN;
			timed_wait(r, 0.05);
			continue;
		}
		int b = r->cfg.batch < w->idx_cap ? r->cfg.batch : w->idx_cap;
		w->batch_n = sampler_take(r, b, w->idx);
		if (!w->batch_n) {
			w->st = W_WAIT_BEGIN;
			pthread_cond_broadcast(&r->cv);
			timed_wait(r, 0.05);
			continue;
		}
		note_begin(r, w);
		pull(r, w);
		r->n_computing++;
		w->st = W_COMPUTE;
		pthread_mutex_unlock(&r->mu);
		double t0 = sl_now();
		compute(r, w);
		double dt = sl_now() - t0;
		pthread_mutex_lock(&r->mu);
		r->n_computing--;
		pthread_cond_broadcast(&r->cv);
		size_t off = w->grad_off;
		double d = delay_s(w, dt, (double)(r->n_params - off) * sizeof(float));
		if (held_at_server(r, w)) {
			if (hold(r, w, now(r) + d) < 0)
				break;
			w->st = W_IDLE;
			continue;
		}
		if (d > 0) {
			w->st = W_DELAY;
			double until = sl_now() + d;
			while (!r->stopping && sl_now() < until)
				timed_wait(r, until - sl_now());
		}
		while (!r->stopping && !can_push(r, w)) {
			w->st = W_WAIT_PUSH;
			timed_wait(r, 0.05);
		}
		if (r->stopping)
			break;
		if (r->rule == RULE_HOGWILD) {
			/* a stop in updates counts the steps in flight too */
			while (!r->stopping && r->cfg.stop_steps &&
			       ps_version(r->ps) + (uint64_t)r->hog_inflight >=
				       r->cfg.stop_steps) {
				w->st = W_WAIT_PUSH;
				timed_wait(r, 0.05);
			}
			if (r->stopping)
				break;
		}
		if (r->rule == RULE_HOGWILD) {
			r->hog_inflight++;
			/* no lock around the step: others read and write too */
			backend *be = r->be_ps;
			size_t o = w->grad_off;
			float *mom = ps_momentum(r->ps);
			float lr = (float)r->cfg.lr, mu = (float)r->cfg.momentum;
			float wd = (float)r->cfg.weight_decay;
			pthread_mutex_unlock(&r->mu);
			be->ops->sgd(be, (float *)ps_weights(r->ps) + o, w->m->grads + o,
				     mom ? mom + o : NULL, r->n_params - o, lr, mu, wd);
			pthread_mutex_lock(&r->mu);
			r->hog_inflight--;
			uint64_t tau = ps_version(r->ps) - w->v_read;
			ps_advance(r->ps);
			after_version_change(r);
			count_delivery(r, w);
			w->clock++;
			record_stale(r, w, tau, w->t_read);
		} else {
			push(r, w);
		}
		w->st = W_IDLE;
		after_push_wall(r);
		pthread_cond_broadcast(&r->cv);
	}
	w->st = W_IDLE;
	w->exited = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* every active worker between iterations and nothing in flight (lock held) */
static int
all_idle(const run *r)
{
	if (r->n_computing || r->n_held)
		return 0;
	for (int i = 0; i < r->n_slots; i++) {
		const worker *w = r->w[i];
		if (w->active && w->st != W_IDLE && w->st != W_WAIT_BEGIN)
			return 0;
	}
	return 1;
}

static void
progress(run *r)
{
	if (!r->cb.progress || sl_now() - r->last_progress < PROGRESS_EVERY_S)
		return;
	r->last_progress = sl_now();
	run_eval e;
	fill_eval(r, &e);
	e.train_loss = r->loss_n ? r->loss_sum / r->loss_n : r->last_train_loss;
	r->cb.progress(r->cb.ud, &e);
}

/* after a push on the wall clock: evaluation or stop due? (lock held) */
static void
after_push_wall(run *r)
{
	drain_schedule(r); /* entries due at this version, now */
	if (stop_met(r)) {
		r->stopping = 1;
		pthread_cond_broadcast(&r->cv);
	} else if (!r->eval_gate && eval_due(r)) {
		r->eval_gate = 2; /* 2: requested, the control thread evaluates */
		pthread_cond_broadcast(&r->cv);
	}
}

static int
exec_wall(run *r)
{
	set_workers(r, r->cfg.workers);
	for (int i = 0; i < r->n_slots; i++) /* workers of a checkpoint */
		if (r->w[i]->active)
			start_thread(r, r->w[i]);
	for (;;) {
		drain_commands(r);
		serve_checkpoint(r);
		if (r->n_held && release_held(r, 0))
			after_push_wall(r);
		if (r->eval_gate == 2 || (!r->eval_gate && eval_due(r)))
			evaluate(r);
		if (r->stopping || stop_met(r))
			break;
		if (r->take_limit && r->taken >= r->take_limit && all_idle(r)) {
			/* the data is spent: apply what is pending, then stop */
			if (ps_flush_round(r->ps, 1))
				after_version_change(r);
			if (stop_met(r))
				break;
		}
		if (sl_now() - r->last_snap >= SNAP_EVERY_S)
			publish(r);
		progress(r);
		timed_wait(r, r->n_held ? 0.002 : 0.01);
	}
	r->stopping = 1;
	pthread_cond_broadcast(&r->cv);
	for (int i = 0; i < r->n_slots; i++) {
		worker *w = r->w[i];
		if (!w->thread_live)
			continue;
		pthread_mutex_unlock(&r->mu);
		pthread_join(w->th, NULL);
		pthread_mutex_lock(&r->mu);
		w->thread_live = 0;
	}
	return 0;
}

/* ---- virtual clock ---------------------------------------------------------- */

static int
ev_less(const vevent *a, const vevent *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void
schedule(run *r, double t, int wid, int kind)
{
	if (r->n_ev == r->cap_ev) {
		int cap = r->cap_ev ? 2 * r->cap_ev : 64;
		vevent *e = realloc(r->ev, sizeof(vevent) * (size_t)cap);
		SL_ASSERT(e != NULL);
		r->ev = e;
		r->cap_ev = cap;
	}
	if (kind != EV_HELD)
		r->w[wid]->pending = 1;
	int i = r->n_ev++;
	vevent e = {t, r->ev_seq++, wid, kind};
	while (i > 0 && ev_less(&e, &r->ev[(i - 1) / 2])) {
		r->ev[i] = r->ev[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->ev[i] = e;
}

static vevent
ev_pop(run *r)
{
	vevent top = r->ev[0], last = r->ev[--r->n_ev];
	int i = 0;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= r->n_ev)
			break;
		if (c + 1 < r->n_ev && ev_less(&r->ev[c + 1], &r->ev[c]))
			c++;
		if (!ev_less(&r->ev[c], &last))
			break;
		r->ev[i] = r->ev[c];
		i = c;
	}
	if (r->n_ev)
		r->ev[i] = last;
	return top;
}

/* reschedule blocked workers whose condition now holds, in id order */
static void
wake_blocked(run *r)
{
	for (int i = 0; i < r->n_slots; i++) {
		worker *w = r->w[i];
		if (!w->active)
			continue;
		if (w->st == W_WAIT_BEGIN && can_begin(r, w)) {
			w->st = W_IDLE;
			schedule(r, r->vtime, i, EV_START);
		} else if (w->st == W_WAIT_PUSH && can_push(r, w)) {
			w->st = W_IDLE;
			schedule(r, r->vtime, i, EV_ARRIVE);
		}
	}
}

static void
v_start(run *r, worker *w)
{
	if (!w->active)
		return;
	if (!can_begin(r, w)) {
		w->st = W_WAIT_BEGIN;
		return;
	}
	int b = r->cfg.batch < w->idx_cap ? r->cfg.batch : w->idx_cap;
	w->batch_n = sampler_take(r, b, w->idx);
	if (!w->batch_n) {
		w->st = W_WAIT_BEGIN;
		return;
	}
	note_begin(r, w);
	pull(r, w);
	double f = compute(r, w);
	/* simulated time: FLOPs at a nominal speed, scaled by the worker's
	 * speed; never a measured time (that would break determinism) */
	double cost = f / NOMINAL_FLOPS / (w->speed > 0 ? w->speed : 1);
	size_t off = w->grad_off;
	double d = delay_s(w, 0, (double)(r->n_params - off) * sizeof(float));
	w->st = W_DELAY;
	if (held_at_server(r, w)) {
		w->due = d; /* held this long at the server after arriving */
		schedule(r, r->vtime + cost, w->id, EV_ARRIVE);
	} else {
		w->due = 0;
		schedule(r, r->vtime + cost + d, w->id, EV_ARRIVE);
	}
}

static void
v_arrive(run *r, worker *w)
{
	if (w->due > 0) {
		double due = w->due;
		w->due = 0;
		if (!held_at_server(r, w)) {
			/* the rule changed while it travelled: the rest of its
			 * delay delays the arrival */
			schedule(r, r->vtime + due, w->id, EV_ARRIVE);
			return;
		}
		if (hold(r, w, r->vtime + due) < 0)
			return;
		schedule(r, r->vtime + due, w->id, EV_HELD);
	} else if (!can_push(r, w)) {
		w->st = W_WAIT_PUSH;
		return;
	} else {
		push(r, w);
	}
	/* pull again at once: between a worker's push and its next pull no
	 * other event slips in (so N equal-speed workers settle at N-1) */
	w->st = W_IDLE;
	v_start(r, w);
}

static int
exec_virtual(run *r)
{
	set_workers(r, r->cfg.workers);
	for (;;) {
		drain_commands(r);
		serve_checkpoint(r);
		if (stop_met(r))
			break;
		if (r->n_ev == 0) {
			if (r->n_held) {
				release_held(r, 1);
			} else if (ps_flush_round(r->ps, 1)) {
				after_version_change(r);
			} else if (r->take_limit && r->taken >= r->take_limit) {
				break; /* data spent */
			} else {
				/* everyone paused: wait for a command */
				publish(r);
				if (atomic_load(&r->stop_req))
					break;
				timed_wait(r, 0.05);
				wake_blocked(r);
				continue;
			}
			wake_blocked(r);
			if (eval_due(r))
				evaluate(r);
			continue;
		}
		vevent e = ev_pop(r);
		if (e.t > r->vtime)
			r->vtime = e.t;
		worker *w = r->w[e.worker];
		if (e.kind != EV_HELD)
			w->pending = 0;
		if (e.kind == EV_START)
			v_start(r, w);
		else if (e.kind == EV_ARRIVE)
			v_arrive(r, w);
		else
			release_held(r, 0);
		wake_blocked(r);
		if (eval_due(r))
			evaluate(r);
		if (sl_now() - r->last_snap >= SNAP_EVERY_S) {
			/* readers may be waiting on the lock */
			publish(r);
			pthread_mutex_unlock(&r->mu);
			pthread_mutex_lock(&r->mu);
		}
		progress(r);
	}
	return 0;
}

/* ---- lifetime -------------------------------------------------------------- */

int
run_new(const run_config *cfg, const dataset_pair *data, const run_sched *sched,
	int n_sched, const run_callbacks *cb, run **out, char *err)
{
	*out = NULL;
	int rc = config_validate(cfg, err);
	if (rc < 0)
		return rc;
	if (!strcmp(cfg->device, "cuda"))
		return sl_fail(err, SL_EUNSUP, "device: the cuda backend is not built in");
	if (!strcmp(cfg->rule, "hogwild") && !strcmp(cfg->clock, "virtual"))
		return sl_fail(err, SL_EINVAL,
			       "rule: hogwild needs threads sharing memory (clock \"wall\")");
	if (cfg->delay.dist == DELAY_VERSION && cfg->delay.s >= VHIST_MAX)
		return sl_fail(err, SL_EINVAL, "delay.s: at most %d", VHIST_MAX - 1);
	run *r = calloc(1, sizeof(*r));
	if (!r)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	r->cfg = *cfg;
	r->data = data;
	if (cb)
		r->cb = *cb;
	r->virt = !strcmp(cfg->clock, "virtual");
	long nc = sysconf(_SC_NPROCESSORS_ONLN);
	r->ncpu = nc < 1 ? 1 : nc > 64 ? 64 : (int)nc;
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->qmu, NULL);
	pthread_mutex_init(&r->smu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->t0 = sl_now();
	r->err[0] = 0;
	const dataset *tr = &data->train;
	int eval_batch = 500;
	if (backend_cpu_new(1, &r->be_ps) < 0 ||
	    backend_cpu_new(cfg->threads ? cfg->threads : r->ncpu, &r->be_eval) < 0) {
		rc = sl_fail(err, SL_ENOMEM, "cannot start the cpu backend");
		goto fail;
	}
	rc = model_new(cfg->model, tr->c, tr->h, tr->w, tr->classes, eval_batch,
		       cfg->seed, r->be_eval, &r->evm, err);
	if (rc < 0)
		goto fail;
	r->n_params = r->evm->n_params;
	r->full_flops = model_step_flops(r->evm, 0);
	layer_info info[MODEL_MAX_LAYERS];
	ps_layer layers[MODEL_MAX_LAYERS];
	int nl = model_layer_info(r->evm, info, MODEL_MAX_LAYERS), np = 0;
	for (int i = 0; i < nl; i++)
		if (info[i].n_params)
			layers[np++] = (ps_layer){info[i].p_off, info[i].n_params};
	float *w0 = malloc(sizeof(float) * r->n_params);
	if (!w0) {
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
		goto fail;
	}
	r->be_eval->ops->download(r->be_eval, w0, r->evm->params,
				  sizeof(float) * r->n_params);
	rc = ps_new(r->be_ps, r->n_params, w0, layers, np, CFG_MAX_WORKERS, &r->ps);
	free(w0);
	if (rc < 0) {
		sl_fail(err, SL_ENOMEM, "out of memory");
		goto fail;
	}
	r->perm = malloc(sizeof(uint32_t) * tr->n);
	if (!r->perm) {
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
		goto fail;
	}
	r->pos = tr->n; /* shuffle on first take */
	if (cfg->stop_epochs > 0)
		r->take_limit = (uint64_t)ceil(cfg->stop_epochs * tr->n - 0.5);
	r->rule = (rule_kind)rule_from_name(cfg->rule);
	ps_set_rule(r->ps, r->rule, &cfg->rp);
	ps_set_opt(r->ps, (float)cfg->lr, (float)cfg->momentum,
		   (float)cfg->weight_decay);
	if (cfg->eval_every > 0)
		r->next_eval_v = (uint64_t)cfg->eval_every;
	if (n_sched > 0) {
		r->sched = malloc(sizeof(run_sched) * (size_t)n_sched);
		if (!r->sched) {
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
			goto fail;
		}
		memcpy(r->sched, sched, sizeof(run_sched) * (size_t)n_sched);
		r->n_sched = n_sched;
	}
	ensure_vhist(r);
	r->state = RUN_STARTING;
	publish(r);
	*out = r;
	return 0;
fail:
	run_free(r);
	return rc;
}

int
run_exec(run *r)
{
	pthread_mutex_lock(&r->mu);
	r->t0 = sl_now();
	r->exec_live = 1;
	r->state = r->paused ? RUN_PAUSED : RUN_RUNNING;
	publish(r);
	int rc = r->virt ? exec_virtual(r) : exec_wall(r);
	/* deliver what is in flight, close a partial round, final record
	 * (never past a stop in updates) */
	if (!r->fail_rc) {
		release_held(r, 1);
		if (steps_left(r) && ps_flush_round(r->ps, 1))
			after_version_change(r);
	}
	if (r->fail_rc)
		rc = r->fail_rc;
	if (!r->n_series || r->series[r->n_series - 1].v != ps_version(r->ps) ||
	    r->series[r->n_series - 1].samples != r->samples)
		evaluate(r);
	stop_met(r);
	run_eval e;
	fill_eval(r, &e);
	e.final = 1;
	e.stop_reason = r->stop_reason ? r->stop_reason : "stopped";
	r->state = r->fail_rc ? RUN_FAILED : RUN_FINISHED;
	if (r->cb.eval)
		r->cb.eval(r->cb.ud, &e);
	serve_checkpoint(r);
	r->exec_live = 0;
	pthread_cond_broadcast(&r->cv);
	publish(r);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void
run_stop(run *r)
{
	atomic_store(&r->stop_req, 1);
	pthread_mutex_lock(&r->mu);
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

void
run_free(run *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->n_slots; i++)
		SL_ASSERT(!r->w[i]->thread_live);
	for (int i = 0; i < r->n_slots; i++)
		worker_destroy(r, r->w[i]);
	for (int i = 0; i < r->n_held; i++) {
		free(r->held[i].g);
		free(r->held[i].bak);
	}
	free(r->held);
	for (int i = 0; i < r->vh_depth; i++)
		r->be_ps->ops->free(r->be_ps, r->vh[i]);
	ps_free(r->ps);
	model_free(r->evm);
	backend_free(r->be_eval);
	backend_free(r->be_ps);
	run_snapshot_put(r->snap);
	free(r->series);
	free(r->q);
	free(r->sched);
	free(r->ev);
	free(r->perm);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->qmu);
	pthread_mutex_destroy(&r->smu);
	pthread_cond_destroy(&r->cv);
	free(r);
}

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
static void
save_state(run *r, blob *b)
{
	blob_put(b, CKPT_MAGIC, 8);
	blob_u64(b, sizeof(run_config));
	blob_u64(b, r->n_params);
	blob_u64(b, r->data->train.n);
	blob_put(b, &r->cfg, sizeof(run_config));
	uint64_t u[] = {r->samples, r->updates, (uint64_t)r->loss_n, r->taken,
			r->take_limit, r->pos, r->shuffles, r->next_eval_v,
			r->epochs_done, r->clock_gap_max, (uint64_t)r->sched_pos,
			r->ev_seq, (uint64_t)r->rule, (uint64_t)r->n_slots,
			(uint64_t)r->win_pos, (uint64_t)r->win_n, (uint64_t)r->paused,
			(uint64_t)r->n_series, (uint64_t)r->n_ev, (uint64_t)r->n_held,
			(uint64_t)r->vh_depth};
	blob_put(b, u, sizeof(u));
	double d[] = {r->loss_sum, r->vtime, wall(r), r->eval_s, r->best_acc,
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
	    u[20] > VHIST_MAX || u[5] > r->data->train.n || u[12] >= RULE_COUNT)
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
	r->rule = (rule_kind)u[12];
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
		publish(r);
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
			save_state(r, &r->ckpt);
		}
	} else {
		save_state(r, &r->ckpt);
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
static void
serve_checkpoint(run *r)
{
	if (r->ckpt_req != 1)
		return;
	if (!r->virt) {
		/* no compute in flight: gate new steps like an evaluation */
		int gate = r->eval_gate;
		r->eval_gate = 1;
		while (r->n_computing > 0)
			pthread_cond_wait(&r->cv, &r->mu);
		save_state(r, &r->ckpt);
		r->eval_gate = gate;
	} else {
		save_state(r, &r->ckpt);
	}
	r->ckpt_req = 2;
	pthread_cond_broadcast(&r->cv);
}
