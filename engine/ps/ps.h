/* ps.h - the parameter server: flat weights, the version counter v, the
 * optimiser state (momentum) and each update rule's server-side state and
 * arithmetic. Message-shaped: a worker pulls weights (with the version it
 * has, so an unchanged model is not copied) and pushes a gradient tagged
 * with the version it was computed on; in-process and remote workers go
 * through the same two calls. Not thread-safe: the caller (engine/run/run.c)
 * holds its lock around each call. All arithmetic goes through the backend
 * table. */
#ifndef SL_PS_H
#define SL_PS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "ps_config.h"
#include "rule.h"
#include "sl.h"



/* One push. g holds n floats; only [off, n) is meaningful (structured
 * partial backprop sends the top layers, a contiguous tail). */
/* What a message to the server carries. */
typedef enum ps_kind {
	PS_GRADIENT, /* a gradient from off on, applied through the rule */
	PS_MODEL,    /* a worker's weights, for the models' average (localsgd) */
	PS_ELASTIC,  /* a worker's weights for an elastic exchange (easgd); the
		      * reply is the difference alpha (x - centre) */
} ps_kind;

/* One message from a worker: a header and a payload of n floats (only
 * [off, n) is meaningful for a gradient: structured partial backprop sends
 * the top layers, a contiguous tail). The same shape serves an in-process
 * worker and, over a transport, a remote one. */
typedef struct ps_grad {
	ps_kind kind;
	int worker;
	uint64_t seq;    /* per-worker sequence number */
	uint64_t v_read; /* version of the weights g was computed on */
	size_t off;
	int batch;
	const float *g;  /* the payload */
	/* where the payload is: 0, memory the server's backend reads in place
	 * (an in-process worker on a host-memory backend: no copy); 1, host
	 * memory (a remote worker's received bytes, a device worker's
	 * download), staged into the server's memory first when the server's
	 * backend is not in host memory */
	int host;
	/* DC-ASGD: the weights g was computed on, when the server kept them
	 * with the gradient (a gradient held at the server while its worker
	 * pulled again); NULL: the worker's backup from its last pull */
	const float *bak;
	/* PS_ELASTIC: the moving rate, and where the reply goes (n floats, in
	 * host memory when host is set) */
	float alpha;
	float *reply;
	/* streaming-diloco: the fragment the payload is a model of (only its
	 * coordinates are read; ps_fragment_ranges) */
	int part;
	/* a sparse payload (demo's coefficients): 1 where g carries a value,
	 * 0 elsewhere, n floats in g's memory; the round counts the senders
	 * of each float (ps_round_senders). NULL: dense. */
	const float *kept;
} ps_grad;

/* A slice of the flat buffer: floats [off, off + len). */
typedef struct ps_range {
	size_t off, len;
} ps_range;

/* What a push did. */
typedef struct ps_result {
	int applied;      /* 1 when the version advanced */
	uint64_t tau;     /* staleness of this gradient: v - v_read */
	int round_count;  /* sync rules: gradients now in the round */
} ps_result;

typedef struct ps ps;

/* Weights start as a copy of w0 (n floats, host memory). max_workers
 * bounds worker ids. Returns 0 or -SL_ENOMEM/-SL_EINVAL. */
int ps_new(backend *be, size_t n, const float *w0, const ps_layer *layers,
	   int n_layers, int max_workers, ps **out);
void ps_free(ps *p);

/* Switch rule (pending round state is dropped: its gradients were never
 * applied). lr, momentum, weight decay apply to every rule's global step. */
void ps_set_rule(ps *p, const rule_class *rc, const rule_params *rp);
void ps_set_opt(ps *p, float lr, float momentum, float weight_decay);

/* The optimiser, the schedule and clipping (ps_config.h). A change of
 * family (sgd, momentum, nesterov against adam, adamw) zeroes the
 * optimiser's state; within a family it is kept. 0, or -SL_ENOMEM when its
 * state cannot be allocated. */
SL_MUST_USE int ps_set_optim(ps *p, const opt_cfg *oc);
const opt_cfg *ps_optim(const ps *p);

/* A layer of off, len floats whose first wlen adamw decays, its first
 * n_weights a matrix of w_cols columns (0: a vector, as a norm's gains),
 * the rest a bias (a matrix's) or vectors of n_weights floats (a norm's
 * biases): the shapes demo chunks by (ps_layer's rows, cols, vlen). */
ps_layer ps_layer_make(size_t off, size_t len, size_t wlen, size_t n_weights, size_t w_cols);
/* The model's parameterised layers as the server and a worker's optimiser
 * see them (their offsets, the floats adamw decays, their shapes), into
 * out (cap entries: MODEL_MAX_NODES holds any model's); returns how many.
 * The run's server and a remote worker process (its local steps) both
 * take them from here. */
struct model;
int ps_model_layers(const struct model *m, ps_layer *out, int cap);

/* the parameterised layers (n of them), as given to ps_new */
const ps_layer *ps_layers(const ps *p, int *n);

/* The model's units, what streaming-diloco cuts into fragments: unit_of[l]
 * is layer l's unit, non-decreasing from 0 by steps of at most 1 (a
 * residual block's layers are one unit). Until set, every layer is a unit
 * of its own. ps_units returns how many there are. */
void ps_set_units(ps *p, const int *unit_of);
int ps_units(const ps *p);
/* Fragment `part` of `parts`: the units u with u mod parts == part (the
 * strided pattern of Streaming DiLoCo), as the ranges of the flat buffer
 * their layers cover, adjacent layers merged (so one fragment is the
 * whole buffer as one range); into out[0..n_layers); returns how many.
 * *floats (when not NULL): their total length. */
int ps_fragment_ranges(const ps *p, int part, int parts, ps_range *out, size_t *floats);

uint64_t ps_version(const ps *p);
const float *ps_weights(const ps *p); /* backend memory, n floats */
size_t ps_size(const ps *p);

/* Copy the weights into dst unless *have == v; sets *have = v. Records the
 * copy as `worker`'s backup for DC-ASGD. Returns 1 if copied, 0 if not. */
int ps_pull(ps *p, int worker, float *dst, uint64_t *have);

/* A zero-copy read for a worker that computes in the server's memory (an
 * in-process worker on the server's backend): the current weights, pinned
 * until ps_unpin; their version in *v; recorded as the worker's DC-ASGD
 * backup. A write while they are pinned goes to a copy (copy on write), so
 * a pinned buffer never changes under its readers. One worker costs no
 * copy at all; N workers cost one copy per write made while others read. */
const float *ps_pin(ps *p, int worker, uint64_t *v);
void ps_unpin(ps *p, const float *buf);
/* 1 once a copy on write could not be allocated (the write went in place;
 * the caller should fail the run) */
int ps_failed(const ps *p);

/* A stale read (version delays): copy old, the server's weights of version
 * v_old (kept by the caller's version history), into dst and record them
 * as `worker`'s DC-ASGD backup, so the compensation uses the weights the
 * gradient is computed on. */
void ps_pull_old(ps *p, int worker, const float *old, uint64_t v_old,
		 float *dst, uint64_t *have);

/* DC-ASGD: the weights `worker` last read (backend memory, n floats), or
 * NULL when it never pulled under dcasgd. */
const float *ps_backup(const ps *p, int worker);

/* Deliver one message. A gradient is applied (or, for round rules, added
 * to the round) through the rule; round_size is the number a round needs
 * (ssgd/odsgd: active workers; softsync: max(1, active / n); localsgd's
 * average: active workers). -SL_EINVAL for a malformed header,
 * -SL_ENOMEM when a host payload cannot be staged. */
SL_MUST_USE int ps_push(ps *p, const ps_grad *g, int round_size, ps_result *res);

/* ---- for the rules' server hooks (engine/ps/rules/) ---- */

/* One optimiser step (momentum, weight decay) with g on [off, n) at
 * learning rate lr; the version advances. */
/* Run the update arithmetic (sgd, axpy, scal of ps_step and the sync
 * rules' rounds) on `be` until the next call: a worker's backend of the
 * same kind in host memory, so its compute team applies the update it
 * pushes instead of the server's one thread. The arithmetic is
 * elementwise, so the result is the same on any team. NULL, or any other
 * backend, gives the server's own back. */
void ps_lend(ps *p, backend *be);
void ps_step(ps *p, const float *g, size_t off, float lr);
/* Add g to the pending round, per layer; when the round holds round_size
 * gradients, apply each layer's average over its senders. 1 if applied. */
SL_MUST_USE int ps_round_add(ps *p, const ps_grad *g, int round_size);
/* gradients in the pending round */
int ps_round_pending(const ps *p);
/* For a rule's server_round: the pending round's sum (n floats, backend
 * memory), and the number of senders of each float when its messages
 * were sparse (ps_grad.kept; NULL when none was), as floats */
const float *ps_round_sum(const ps *p);
const float *ps_round_senders(const ps *p);
/* ... and the weights to write (a copy first when readers pin them) */
float *ps_weights_rw(ps *p);
/* the learning rate of the next update: the run's lr under the schedule */
float ps_lr(const ps *p);
/* the optimiser's settings (ps_set_opt): its learning rate, momentum and
 * weight decay (hogwild steps the shared weights with them) */
void ps_opt(const ps *p, float *lr, float *momentum, float *weight_decay);
const rule_params *ps_params(const ps *p);
backend *ps_backend(const ps *p);
/* n floats of scratch in the server's memory (overwritten by any call) */
float *ps_scratch(ps *p);
/* a per-worker buffer of n floats the rule may keep (zeroed when made;
 * saved in checkpoints), or NULL when out of memory */
float *ps_worker_state(ps *p, int worker);

/* The outer optimiser's step of the DiLoCo rules (outer_lr eta and
 * outer_momentum mu of the rule's parameters; the momentum b is the
 * server's, zero at first, in checkpoints): when db is not NULL, b = mu b
 * + sb db; then W -= eta (sw dw + mu b), the momentum term only when
 * with_b (outer_opt nesterov, the default). With outer_opt momentum
 * (heavy ball) the momentum term is b's before its update, W -= eta (sw
 * dw + mu b_old), which for sb db = sw dw is torch's b = mu b + d, W -=
 * eta b; outer_opt sgd takes mu as 0. diloco's round: (Delta, 1, Delta,
 * 1, 1); an arrival
 * of Delayed Nesterov between its momentum steps: (NULL, 0, Delta, 1/N,
 * 0). It does not advance the version. 0, or -SL_ENOMEM. */
SL_MUST_USE int ps_outer_step(ps *p, const float *db, float sb, const float *dw, float sw,
			      int with_b);

/* streaming-diloco's round of one fragment: g->g is a worker's model,
 * read on fragment g->part of parts (rule_params fragments) alone, added
 * to the round's sum there; when round_size models of the fragment are in,
 * their mean m gives the pseudo-gradient Delta = W - m on the fragment's
 * coordinates, through the outer optimiser restricted to them
 * (ps_outer_step's arithmetic; the outer momentum is per coordinate), and
 * the version advances. Rounds of different fragments are kept apart
 * (their coordinates are disjoint). 1 if applied, 0 if not yet,
 * -SL_EINVAL for a fragment out of range, -SL_ENOMEM. */
SL_MUST_USE int ps_fragment_add(ps *p, const ps_grad *g, int parts, int round_size);

/* One arrival's pseudo-gradient d at weight wt through the outer
 * optimiser, async-diloco's: with dn_period N = 1, Nesterov on it
 * (ps_outer_step(d, wt, d, wt, 1)); with N > 1 Delayed Nesterov (Liu et
 * al. 2024, Alg. 3, c = 0): d joins the pending sum (the round buffer,
 * in checkpoints); every arrival steps W -= eta wt d / N, and every N-th
 * also takes b = mu b + sum / N and W -= eta mu b. The version advances.
 * 0, or -SL_ENOMEM. */
SL_MUST_USE int ps_outer_arrival(ps *p, const float *d, float wt);

/* Sync rules: apply the pending round now if it holds at least round_size
 * gradients (after workers left); streaming-diloco: a fragment's round of
 * at least round_size models (one, the first found). Returns 1 if
 * applied. */
SL_MUST_USE int ps_flush_round(ps *p, int round_size);

/* PS_ELASTIC: the worker sends its weights x; the centre moves toward x
 * by diff = alpha (x - centre), the reply is diff, for the worker to take
 * x -= diff; v advances.
 * PS_MODEL: x joins the round's sum; when round_size models are in, the
 * weights become their mean and v advances (res->applied). */

/* Hogwild: the caller steps the shared weights itself, without a lock,
 * with the server's momentum buffer (NULL when momentum is 0), then counts
 * the update with ps_advance. */
float *ps_momentum(ps *p);
void ps_advance(ps *p);

/* Checkpoint the server's whole state (weights, version, momentum, the
 * pending round, DC-ASGD backups) as tagged fields into the open section
 * of w / restore it from section s into a server of n floats. With p NULL,
 * ps_restore only checks s. 0, or -SL_EFORMAT with err naming the field. */
struct tlv_w;
struct tlv_sec;
void ps_save(const ps *p, struct tlv_w *w);
SL_MUST_USE int ps_restore(ps *p, const struct tlv_sec *s, size_t n, char *err);

/* Overwrite weights and version (checkpoint resume, tests). */
void ps_load(ps *p, const float *w, uint64_t v);

#endif
