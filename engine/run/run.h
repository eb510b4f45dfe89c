/* run.h - a training run: the parameter server, N workers, the update rule,
 * injected delays, staleness accounting, evaluation, on the wall clock
 * (worker threads that really sleep) or the virtual clock (a deterministic
 * discrete-event schedule: gradients really computed, nobody sleeps).
 *
 * Thread-safe control: run_command() queues a change (from the HTTP API,
 * the TUI, the schedule), the run applies it between steps and reports it
 * through the change callback, so a log's change records replay the run.
 * Readers take immutable, reference-counted snapshots. */
#ifndef SL_RUN_H
#define SL_RUN_H

#include <stdint.h>

#include "config.h"
#include "dataset.h"
#include "wbatch.h"
#include "stats.h"

typedef enum run_state {
	RUN_STARTING,
	RUN_RUNNING,
	RUN_PAUSED,
	RUN_FINISHED,
	RUN_FAILED,
	RUN_DIVERGED, /* ended at a non-finite loss, gradient or model */
} run_state;

const char *run_state_name(run_state s);

/* A change: run-wide when worker < 0, else for one worker. `fields` says
 * which members are set. */
enum {
	CMD_RULE = 1 << 0,
	CMD_RULE_PARAMS = 1 << 1,
	CMD_LR = 1 << 2,
	CMD_MOMENTUM = 1 << 3,
	CMD_BATCH = 1 << 4,
	CMD_WORKERS = 1 << 5,
	CMD_PAUSED = 1 << 6,
	CMD_STOP = 1 << 7,       /* run-wide: stop the run now */
	CMD_DELAY = 1 << 8,      /* run-wide: every worker; else one */
	CMD_SPB = 1 << 9,
	CMD_SPEED = 1 << 10,
	CMD_WEIGHT_DECAY = 1 << 11,
	CMD_EVAL_EVERY = 1 << 12,
	CMD_CHECKPOINT = 1 << 13, /* hand a checkpoint to cb.checkpoint */
	CMD_LINK = 1 << 14,      /* run-wide: every worker; else one */
	CMD_SERVER_MS = 1 << 15,
	CMD_OPTIMIZER = 1 << 16,
	CMD_CLIP = 1 << 17,
	CMD_STEP_MS = 1 << 18,
};

typedef struct run_cmd {
	int worker;
	unsigned fields;
	char rule[32];
	rule_params rp;
	double lr, momentum, weight_decay;
	int batch, workers, paused, spb_depth, eval_every;
	delay_cfg delay;
	link_cfg link;
	double speed, server_ms;
	double step_ms;
	int optimizer;   /* opt_kind */
	double clip;
	char origin[16]; /* "api", "schedule", "demo", ... (for the log) */
	char path[256];  /* CMD_CHECKPOINT: where the caller should write it */
} run_cmd;

/* A timed change from the run object's schedule. */
typedef struct run_sched {
	int by_version; /* 1: at version v; 0: at time t (run seconds) */
	uint64_t v;
	double t;
	run_cmd cmd;
} run_sched;

#define RUN_SAMPLE 64 /* bytes of a language model's sample at an evaluation */

/* One evaluation (and the end record when final = 1). */
typedef struct run_eval {
	double t;            /* run seconds: wall, or virtual on the virtual clock */
	uint64_t v;
	double epoch;
	uint64_t samples;
	double train_loss;   /* mean batch loss since the previous record */
	double test_loss, test_acc, best_acc;
	/* 1: a language model on text (the data set has a vocabulary): its
	 * test_loss is the mean cross-entropy per token (nats), its test_acc
	 * the next-token accuracy; reports add the perplexity exp(test_loss)
	 * and the bits per byte test_loss / ln 2 (a token is a byte) */
	int lm;
	/* a language model: RUN_SAMPLE bytes drawn from the evaluated weights
	 * (temperature 1, the same seeded stream at every evaluation, from a
	 * newline or the vocabulary's first byte, which starts it), so the text
	 * shows what the model learned; "" otherwise */
	char sample[RUN_SAMPLE + 2];
	double train_s;      /* wall seconds of training, evaluation excluded */
	double samples_per_s;
	double updates_per_s;
	stale_hist stale;    /* cumulative */
	age_hist age;        /* time-staleness (ms), cumulative */
	/* gradient coherence (coherence_every): the mean cosine between the
	 * applied gradients and fresh ones of the same batches at the weights
	 * they were applied to, over the samples since the previous record
	 * (n of them; 0: none) and over the whole run */
	double coherence, coherence_all;
	long coherence_n, coherence_all_n;
	/* the lr the next update runs at, under an lr_schedule (NaN without
	 * one: the logs stay as they were) */
	double lr;
	int final;
	const char *stop_reason;
	const char *error; /* final, stop "failed": why (valid during the callback) */
} run_eval;

/* The first non-finite step of a run: caught after the worker's compute
 * (the batch loss, then the gradient from its layer offset on) or before
 * a model message (localsgd, easgd) leaves it, and never applied. The run
 * then stops with stop reason "diverged" and state RUN_DIVERGED; the
 * server keeps the last weights every applied message left, all finite. */
typedef struct run_divergence {
	double t;         /* run seconds when caught */
	uint64_t v;       /* the server's version then (nothing applied after) */
	int worker;
	uint64_t v_read;  /* the version the step computed on */
	const char *what; /* "loss", "gradient" or "model" */
	double loss;      /* the step's batch loss (NaN, inf, or finite) */
} run_divergence;

typedef struct worker_snap {
	int id;
	const char *state;   /* running, waiting, delayed, paused */
	delay_cfg delay;
	link_cfg link;
	int spb_depth;
	double speed;
	double step_ms;      /* 0: FLOP-priced */
	uint64_t iterations, samples;
	double staleness_mean;
	/* the local steps of its current phase (its H: the rule's phase_h,
	 * async-diloco's dylu included); 0: the rule has no phases */
	int h;
	double samples_per_s;     /* since it joined */
	double samples_per_s_now; /* over the run's rate window */
	double bytes_sent, bytes_recv; /* pushed to / pulled from the server */
	double comm_s;       /* virtual clock: seconds on its link */
	double flops;        /* FLOPs computed: forward + backward */
	double flops_bwd;    /* ... of which the backward (derived: report.c) */
	double flops_saved;  /* backward FLOPs partial backprop did not spend */
	stale_hist stale;
	age_hist age;
	int remote;          /* computed by a remote process (run_join_remote) */
	char host[64];       /* ... which said it runs there */
	const char *device;  /* the backend it computes on: cpu, cuda, ... */
	double mem_bytes;    /* the backend memory its model and state hold */
	double rtt_ms;       /* ... its link's round trip, by its heartbeats (0: not yet) */
	uint32_t part;       /* the samples it draws from: its part (iid: the set) */
} worker_snap;

/* What a run trains: its model's size and cost (GET /api/v1/status
 * "model_summary", stalelab run's first lines, the dashboard). */
typedef struct model_summary {
	int nodes, param_layers;
	size_t params;
	double fwd_flops;    /* per sample, forward only (an evaluation) */
	double step_flops;   /* per sample, forward and full backward */
	double act_floats;   /* activation floats per sample, every node's output */
	/* the values spb_depth takes: 0 (full backprop), then the depths
	 * that end at a block boundary (every depth of a sequential model) */
	int spb_depths[CFG_SPB_MAX + 1], n_spb_depths;
} model_summary;

typedef struct run_snapshot {
	int refs;
	run_state state;
	run_config cfg;      /* the run object with every live change applied */
	const char *device;  /* the opened backend ("auto" resolved): cpu, ref */
	char device_note[SL_ERR_LEN]; /* why "auto" passed a class over, or "" */
	char device_about[160]; /* the backend's own line (a GPU: name, memory) */
	double t, train_s, epoch;
	uint64_t v, samples;
	double samples_per_s, updates_per_s; /* run-long: per second of training */
	/* current: over the last few seconds of run time (virtual seconds on
	 * the virtual clock), as the staleness window */
	double samples_per_s_now, updates_per_s_now;
	double rate_window_s;
	/* a finished run: samples/s over its last rate window of training,
	 * as it stopped (samples_per_s_now is 0 by then); 0 before */
	double samples_per_s_end;
	double last_loss, test_acc, best_acc;
	double test_loss;    /* at the latest evaluation (NaN before one) */
	int lm;              /* a language model: as run_eval's lm */
	double lr_now;       /* the lr of the next update (lr under the schedule) */
	model_summary model;
	stale_hist stale;    /* cumulative */
	stale_hist window;   /* the last few seconds */
	/* what the current rule's staleness counts: "versions", "local
	 * steps", "outer versions" (rule_stale_unit) */
	const char *stale_unit;
	age_hist age;        /* time-staleness (ms) */
	const char *stop_reason; /* once finished: epochs, steps, ... */
	char error[SL_ERR_LEN];  /* why the run failed ("" unless failed) */
	int diverged;            /* 1 once caught: div says where */
	run_divergence div;
	uint64_t clock_gap_max;  /* widest (clock - slowest clock) at a start */
	uint64_t remote_joined, remote_lost; /* remote workers that came, and were lost */
	uint64_t remote_left;    /* ... and that left, saying so */
	uint64_t remote_dropped; /* their steps in flight when lost, never applied */
	/* remote pushes (the ledger): applied, resends of applied ones, of
	 * steps given up, and from an earlier daemon, run or process */
	uint64_t remote_applied, remote_duplicates, remote_abandoned, remote_stale;
	uint32_t remote_generation; /* restores from a checkpoint */
	int n_workers;
	worker_snap *workers;
	/* per worker, the class counts of its part (iid: of the whole set):
	 * classes[i * n_classes + k] for workers[i]; n_classes 0 (classes
	 * NULL) on data without labels (text) */
	int n_classes;
	uint32_t *classes;
	uint64_t split_gen;  /* splits made (0 under iid) */
} run_snapshot;

/* A data split made (not iid): part j, worker j's, holds off[j+1] - off[j]
 * samples; classes[j * n_classes + k] of them of class k (NULL, n_classes
 * 0, on data without labels). */
typedef struct run_split {
	const char *spec;       /* the run's data_split */
	uint64_t splits;        /* made so far, this one included */
	int n_parts, n_classes;
	const uint32_t *off;
	const uint32_t *classes;
} run_split;

typedef struct run_callbacks {
	void (*eval)(void *ud, const run_eval *e);
	/* a change was applied at (t, v) */
	void (*change)(void *ud, double t, uint64_t v, const run_cmd *c);
	/* progress after updates (may be NULL; called from the run's thread) */
	void (*progress)(void *ud, const run_eval *e);
	/* a CMD_CHECKPOINT was reached: the serialised run (NULL when out of
	 * memory) for the command's path */
	void (*checkpoint)(void *ud, const run_cmd *c, const uint8_t *buf,
			   size_t len);
	/* the run diverged (once, from the thread that caught it, lock held;
	 * may be NULL); the end record follows */
	void (*diverged)(void *ud, const run_divergence *d);
	/* a remote worker joined, left (saying so) or was lost: what is
	 * "joined", "left" or "lost" (lock held; may be NULL) */
	void (*remote)(void *ud, double t, uint64_t v, int worker, const char *what,
		       const char *host);
	/* a data split was made: the first as the run starts, then one at
	 * each change of the worker count (lock held; may be NULL) */
	void (*split)(void *ud, double t, uint64_t v, const run_split *s);
	void *ud;
} run_callbacks;

typedef struct run run;

/* A worker whose gradients are computed elsewhere (a remote worker
 * process, docs/remote.md). The run does everything else for it exactly as
 * for a local worker, through the same step code: its batch, the weights
 * it reads and their version, its delay, its partial-backprop depth, the
 * rule, the staleness. compute() is called from the worker's thread
 * outside the run's lock with those weights (n floats) and the batch (its
 * sample indices and the key of their views: the worker computes on
 * wstep_load's batch, as a local one does); it fills grads[off..n) and *loss and returns 0, or
 * returns RUN_REMOTE_LOST when the worker is lost, or RUN_REMOTE_LEFT when
 * it left (said so): it then leaves the run (a round waiting for it goes on
 * without it), its step is dropped and counted.
 * left() is called once the run no longer calls compute (may be NULL).
 * cancel() (may be NULL), called with the run's lock held when the run
 * stops, must make a compute in progress return soon (< 0) and not block. */
enum { RUN_REMOTE_LOST = -1, RUN_REMOTE_LEFT = -2 };

/* A local step (rules with phases of local steps, RULE_PHASES): the
 * remote worker takes it on its own weights and keeps them. compute()
 * then sends the weights only with `weights` set (the phase starts from
 * them), and fills grads with the model the step reached (all n floats)
 * only when `exchange` is set (the phase ends with it); otherwise only
 * *loss. */
typedef struct run_remote_range {
	size_t off, len;
} run_remote_range;

typedef struct run_remote_local {
	int on;          /* the step is one */
	int weights;     /* the weights go down with it */
	int exchange;    /* the model comes back */
	int reset;       /* the worker's optimiser starts afresh first */
	int opt;         /* opt_kind */
	float lr, mu, wd;
	double beta1, beta2, eps, clip;
	/* fragments (streaming-diloco): with n_up > 0 the exchange brings
	 * back only these ranges of the model (into grads at their offsets);
	 * the n_down ranges of the weights go down before the step and are
	 * mixed into the worker's own, x = w + mix (x - w) (optim_mix) */
	int n_up, n_down;
	const run_remote_range *up, *down;
	float mix;
} run_remote_local;

typedef struct run_remote_ops {
	int (*compute)(void *ctx, const float *weights, size_t n, uint64_t v_read,
		       const wbatch *b, int depth, size_t off, float *grads, double *loss,
		       const run_remote_local *loc);
	void (*left)(void *ctx);
	void (*cancel)(void *ctx);
} run_remote_ops;

/* Add a remote worker (before run_exec or while it runs): a new worker id,
 * *id. Wall clock only; refused for hogwild (shared weights), a finished
 * run, or a run with the most workers. err says why. */
int run_join_remote(run *r, const run_remote_ops *ops, void *ctx, const char *host, int *id,
		    char *err);

/* The run's ledger of remote pushes (ledger.h): the remote side numbers
 * each step of a worker id with run_remote_issue and hands a push to the
 * run only when run_remote_push says LEDGER_APPLY, so that nothing is
 * applied twice. Saved in checkpoints. Each takes the run's lock; -1 (or
 * 0 from issue) when out of memory or for an id of LEDGER_MAX or more. */
int run_remote_hello(run *r, uint32_t wid, uint32_t incarnation);
uint64_t run_remote_issue(run *r, uint32_t wid);
SL_MUST_USE int run_remote_push(run *r, uint32_t wid, uint32_t incarnation, uint64_t seq);
/* a push made for an earlier daemon or run: dropped, counted */
void run_remote_stale(run *r);
/* remote worker `id`'s link round trip, as its heartbeats measured it */
void run_remote_rtt(run *r, int id, double rtt_ms);

/* Prepare a run of cfg on data (borrowed: must outlive the run), with the
 * schedule sched[0..n_sched) (copied). err names a bad field. */
int run_new(const run_config *cfg, const dataset_pair *data,
	    const run_sched *sched, int n_sched, const run_callbacks *cb,
	    run **out, char *err);

/* Train until a stop condition holds or run_stop() is called; the calling
 * thread runs the control loop (and, on the virtual clock, all compute).
 * Returns 0, or a negative code. */
int run_exec(run *r);

/* Thread-safe: ask the run to stop (run_exec returns soon after). */
void run_stop(run *r);

/* Thread-safe: validate and queue a change. -SL_EINVAL with err naming the
 * field if it cannot apply (bad worker id, unknown rule, ...). */
int run_command(run *r, const run_cmd *c, char *err);

/* Before run_exec, on a run restored from a checkpoint (run_restore):
 * the settings of `to` in place of the checkpoint's (all that may change
 * mid-run: rule and its parameters, lr, momentum, weight decay, batch,
 * eval_every, the delay, the worker count and every worker's overrides),
 * and the first sched_done entries of the schedule counted as applied. A
 * recover goes on this way with what the diverged run had reached: the
 * checkpoint's weights, the diverged run's settings, each schedule entry
 * applied once. -SL_ESTATE once the run has started, -SL_EINVAL (err
 * names the field) for what the run cannot take (a larger batch). */
int run_adopt_settings(run *r, const run_config *to, int sched_done, char *err);

/* Thread-safe: a copy of the run's schedule (*out, free it; NULL when
 * empty), its length, and how many entries have been applied (*done).
 * Returns 0 or -SL_ENOMEM. */
int run_schedule_copy(run *r, run_sched **out, int *n, int *done, char *err);

/* Thread-safe: the latest snapshot (refcounted; release with
 * run_snapshot_put). Never NULL after run_new. */
run_snapshot *run_snapshot_get(run *r);
void run_snapshot_put(run_snapshot *s);

/* Thread-safe: copy evaluation records with v > since into out (at most
 * max); returns how many. A run keeps its latest 8192 records and, older
 * than those, every other one of the rest (thinned again as it grows), so
 * memory stays bounded however long it runs. */
int run_series(run *r, uint64_t since, run_eval *out, int max);

/* Thread-safe: copy the server's weights (n_params floats, host memory)
 * into out; returns n_params, or 0 if max is too small. */
size_t run_weights(run *r, float *out, size_t max);

/* Thread-safe: serialise the whole run at a quiet point between steps
 * (*buf malloc'd, caller frees). On the virtual clock the state is exact,
 * gradients in flight included, so a restored run continues bit for bit;
 * on the wall clock gradients in flight are dropped. */
SL_MUST_USE int run_checkpoint(run *r, uint8_t **buf, size_t *len, char *err);

/* Before run_exec(): hand cb.checkpoint a checkpoint (a run_cmd with
 * fields CMD_CHECKPOINT alone, origin "every", path "": the front end
 * names the file) each time the version reaches the next multiple of
 * every, after that version's schedule entries; 0: never. Counted from the
 * version the run starts at: a resumed run does not take its checkpoint's
 * again. Taking one changes nothing in the run (on the virtual clock the
 * run is the same bits with or without). */
void run_checkpoint_every(run *r, uint64_t every);

/* Keep the last good checkpoint in memory (call before run_exec): at each
 * evaluation the whole run is serialised, as run_checkpoint would, at the
 * quiet point the evaluation makes anyway, and kept when the evaluation is
 * good: a finite test loss at most 4 times the lowest so far (a blow-up
 * in progress, still finite, is no place to resume from). A run restored
 * from a checkpoint starts with that state as its good one. Off by
 * default (a headless run stops at a divergence and needs none). */
void run_keep_good(run *r, int on);

/* Thread-safe: a copy of the last good checkpoint (*buf malloc'd, caller
 * frees; with buf NULL only the version) and the version it holds;
 * -SL_ESTATE with err saying so when none was kept (run_keep_good off, or
 * no finite evaluation yet). */
int run_good_checkpoint(run *r, uint8_t **buf, size_t *len, uint64_t *v, char *err);

/* The run object stored in a checkpoint (pure; err names the problem). */
int run_checkpoint_config(const uint8_t *buf, size_t len, run_config *cfg,
			  char *err);

/* The version (PS updates) a checkpoint resumes at (pure). */
int run_checkpoint_version(const uint8_t *buf, size_t len, uint64_t *v, char *err);

/* The vocabulary of a text run's checkpoint (meta.vocab: token id k is the
 * byte vocab[k]) into vocab, its size into *n; *n = 0 for a run on images.
 * The whole checkpoint is checked first, as run_checkpoint_check does
 * (pure). A run's own vocabulary is its data set's (dataset_pair.vocab);
 * run_restore() refuses a checkpoint whose vocabulary is not the data
 * set's. */
int run_checkpoint_vocab(const uint8_t *buf, size_t len, uint8_t vocab[256], int *n,
			 char *err);

/* The server's weights in a checkpoint (the model the run trained so
 * far): *w malloc'd (caller frees), *n floats, after the whole checkpoint
 * is checked as run_checkpoint_check does (pure). */
int run_checkpoint_weights(const uint8_t *buf, size_t len, float **w, size_t *n, char *err);

/* Check a whole checkpoint without loading it: framing, checksum (unless
 * skip_crc, for fuzzing), every required field, types, lengths, ranges
 * (pure; err names the first problem, e.g. checkpoint: missing
 * "workers[2].rng"). run_restore() checks this way before it touches the
 * run. */
int run_checkpoint_check(const uint8_t *buf, size_t len, int skip_crc, char *err);

/* Load a checkpoint into a run made by run_new() from the checkpoint's run
 * object (same model and data), before run_exec(). The run object becomes
 * the checkpoint's, except the stop condition: that stays the one given to
 * run_new() (counted from the original start, like v and epoch). */
SL_MUST_USE int run_restore(run *r, const uint8_t *buf, size_t len, char *err);

/* The set-up every front end repeats: run_new(), then run_restore() from
 * ckpt when it is given (ckpt_len bytes); on failure nothing is left
 * (*out NULL) and err says why. */
int run_open(const run_config *cfg, const dataset_pair *data,
	     const run_sched *sched, int n_sched, const run_callbacks *cb,
	     const uint8_t *ckpt, size_t ckpt_len, run **out, char *err);

void run_free(run *r);

#endif
