/* run_impl.h - the run's private state, shared by the files of the engine
 * that make up a run (never included outside engine/):
 *
 *   run.c            lifetime: run_new, run_exec, run_stop, run_free; time
 *   step.c           one worker step: begin (batch, pull), compute, deliver
 *                    (push, or hold at the server), staleness accounting
 *   workers.c        workers: create, settings, join and leave
 *   command.c        control: check, queue and apply changes; the schedule
 *   report.c         evaluation, stop conditions, series, snapshots
 *   clock_wall.c     the wall clock: a thread per worker, real sleeps
 *   clock_virtual.c  the virtual clock: a deterministic event queue
 *   split_run.c      the data split ("data_split") and each worker's
 *                    sampler over its own part
 *   checkpoint.c     save and restore the whole run (tagged fields, tlv.h;
 *                    ckpt_read.c: a file read and checked, touching no run;
 *                    ckpt_fields.c: the field tables, ckpt_ledger.c: the
 *                    ledger's section; ckpt_fields.h and ckpt_doc.h: what
 *                    they share)
 *
 * Every function here runs with r->mu held unless it says otherwise. */
#ifndef SL_RUN_IMPL_H
#define SL_RUN_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend.h"
#include "blob.h"
#include "delay.h"
#include "ledger.h"
#include "model.h"
#include "ps.h"
#include "rng.h"
#include "run.h"
#include "split.h"
#include "wstep.h"

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
	/* what its rule's worker hooks see (engine/ps/rule.h): its id, model
	 * and backend, the versions it has and read, its clock and sequence,
	 * the batch and gradient tail of the step in flight, the rule's own
	 * state (local steps, odsgd's last round and optimiser state) */
	rule_worker rw;
	int active;       /* counted in the run's workers */
	int paused;
	delay_cfg delay;
	link_cfg link;
	int spb_depth;
	double speed;
	double step_ms;   /* its time a step at speed 1, set (0: FLOP-priced) */
	rng rng_delay;
	double t_read;    /* when it read rw.v_read's weights (run seconds) */
	int depth;        /* spb_depth of the step in flight (read at pull) */
	int want_threads, cur_threads; /* wall: team width, set at a pull */
	uint32_t *idx;
	int idx_cap;
	uint32_t idx_epoch; /* the epoch idx was taken in (its views' key) */
	/* its sampler under a split (split_run.c): this epoch's permutation
	 * of its part (sp_n samples), the next one's place, the epochs of
	 * its part begun (across splits) */
	uint32_t *sp_perm;
	uint32_t sp_n, sp_pos;
	uint64_t sp_epochs;
	double loss;
	int n_held;       /* its gradients held at the server ("where": "server") */
	const float *cw;  /* the weights this step computes on */
	const float *pinned; /* ... when they are the server's, read in place */
	wstate st;
	double due;       /* virtual: when its pending event fires */
	pthread_t th;
	int thread_live;  /* wall: a thread was started and not yet joined */
	int exited;       /* wall: ... and it has left its loop */
	int pending;      /* virtual: a START or ARRIVE event is queued */
	/* statistics */
	uint64_t iterations, samples;
	double bytes_sent, flops, flops_saved; /* flops: forward + backward */
	double bytes_recv;  /* pulled from the server */
	double comm_s;      /* virtual: seconds its messages spent on its link */
	double pull_bytes, push_bytes; /* what the step in flight moves (step_begin) */
	int pull_bg;        /* ... its pull a reply that came in the background
			     * (RULE_FRAGMENTS; read in the same step_begin) */
	double xfer_end;    /* virtual, RULE_FRAGMENTS: when the last push
			     * sent in the background has landed */
	float *ef_res;      /* error feedback's residual (n floats, host memory;
			     * NULL: zero), in checkpoints (compress_push.c) */
	double active_s, t_joined;
	rate_win rate_samples; /* its current samples/s (over WINDOW_S) */
	stale_hist hist;
	age_hist age;
	/* a remote worker (run_join_remote): its compute is elsewhere */
	const run_remote_ops *remote;
	void *remote_ctx;
	float *remote_io;   /* host copies of its weights and gradient (2 n)
			     * when the backend is a device's */
	int remote_left;  /* its owner was told (left()): the slot is free */
	int remote_slot;  /* a remote worker's slot: kept for remote workers,
			   * never revived as a local one (checkpoints keep it) */
	char host[64];
	double rtt_ms;    /* a remote worker's link round trip (run_remote_rtt) */
	/* a remote worker under a rule with phases (RULE_PHASES): its step's
	 * local update (set at its pull), whether it holds the phase's
	 * weights (its last step was local and did not exchange: m->params
	 * are the phase's start), and the inner resets it was told of */
	run_remote_local rloc;
	int remote_held;
	uint32_t remote_resets;
	run_remote_range *rranges; /* rloc's up and down ranges (2 x
				    * MODEL_MAX_NODES; NULL until needed) */
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
enum { EV_START, EV_ARRIVE, EV_HELD, EV_APPLY };

struct run {
	run_config cfg;
	const dataset_pair *data;
	run_callbacks cb;
	int virt;
	int ncpu;
	backend *be_ps;   /* parameter server arithmetic (one thread) */
	backend *be_eval; /* evaluation; all compute on the virtual clock */
	char device_note[SL_ERR_LEN]; /* "auto" passed a class over: why */
	model *evm;
	ps *ps;
	const rule_class *rule;
	rule_run rr;      /* what the rule's worker hooks see (engine/ps/rule.h):
			   * the server, &cfg.rp and step_rule_ops (run_new) */
	size_t n_params;
	double full_flops; /* per sample, full depth */
	/* the values spb_depth takes (config_spb_depths) */
	int spb_depths[CFG_SPB_MAX + 1], n_spb_depths;
	worker *w[CFG_MAX_WORKERS];
	int n_slots;
	/* sampler: one permutation per epoch, shared by all workers */
	uint32_t *perm;
	uint32_t pos;
	uint64_t shuffles;
	rng shuf;
	/* the data split (split_run.c): its kind; not iid: the parts of the
	 * split made for split_n workers (part j, worker j's, is
	 * part[part_off[j] .. part_off[j+1])), the splits made so far; the
	 * class counts of each part (iid: of the whole set), labelled data */
	split_spec split;
	uint32_t *part;
	uint32_t part_off[CFG_MAX_WORKERS + 1];
	int split_n;
	uint64_t split_gen;
	uint64_t split_told; /* splits told to cb.split */
	uint32_t *part_cls;
	int aug;          /* the batches' augmentation, resolved (aug_kind) */
	uint64_t taken, take_limit;
	uint64_t clock_gap_max;
	uint64_t remote_joined, remote_lost, remote_left, remote_dropped;
	ledger *led;      /* remote pushes applied (made at the first remote worker) */
	/* progress */
	uint64_t samples, updates;
	double loss_sum;
	long loss_n;
	double coh_sum, coh_all;  /* gradient coherence: since the last record, all */
	long coh_n, coh_all_n;
	stale_hist hist;
	age_hist age;
	uint64_t win_tau[WINDOW_N];
	double win_t[WINDOW_N];
	int win_pos, win_n;
	/* current rates (over WINDOW_S): server updates and samples */
	rate_win rate_updates, rate_samples;
	/* samples/s over the last WINDOW_S of training, taken when it stops
	 * (before the final evaluation, whose seconds are not training) */
	double samples_per_s_end;
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
	uint64_t ckpt_every; /* run_checkpoint_every(); 0: off */
	uint64_t ckpt_next;  /* the version of the next one; 0: not yet set */
	double vtime;     /* virtual now */
	double server_free; /* virtual: when the server has served its queue */
	double eval_s;    /* wall seconds spent evaluating */
	/* evaluation */
	uint64_t next_eval_v;
	uint64_t epochs_done;
	double best_acc, last_acc, last_test_loss, last_train_loss;
	char last_sample[RUN_SAMPLE + 2]; /* a language model's, at the last evaluation */
	run_eval *series;
	int n_series, cap_series;
	/* control */
	pthread_mutex_t mu;
	atomic_int lock_want; /* callers on their way to mu (run_lock) */
	pthread_cond_t cv;
	pthread_mutex_t qmu;
	run_cmd *q;
	int n_q, cap_q;
	run_sched *sched;
	int n_sched, sched_pos;
	atomic_int stop_req;
	int stopping, paused, eval_gate, n_computing;
	int fail_rc;      /* the run failed (negative SL_E* code; r->err says why) */
	int diverged;     /* a non-finite step was caught: div says where */
	run_divergence div;
	int keep_good;    /* keep the last good checkpoint (run_keep_good) */
	blob good, cand;  /* ... and the one taken before an evaluation */
	uint64_t good_v;
	double good_s;    /* wall seconds spent taking them */
	int n_good;
	double low_loss;  /* the lowest finite test loss so far (0: none yet) */
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

/* run.c: time and lifetime */
double run_now(const run *r);
double run_train_seconds(const run *r);
double run_wall(const run *r);
int run_fail(run *r, int code, const char *why);
/* The first non-finite step (lock held): record it, tell cb.diverged,
 * stop the run ("diverged"); later ones are ignored. */
void run_diverge(run *r, const worker *w, const char *what);
int run_n_running(const run *r);
int run_steps_left(const run *r);
uint64_t run_min_clock(const run *r);
void run_timed_wait(run *r, double seconds);
/* The lock, for callers from outside the run's own threads (the daemon's
 * handlers, a headless run's main): they are let in at the loop's next
 * yield point, however busy it is (a mutex is not fair: a loop that
 * unlocks and locks again would win it back nearly every time). */
void run_lock(run *r);
void run_unlock(run *r);
/* The loops' side (lock held): let every caller of run_lock in before
 * going on. Called between steps, so no caller waits longer than a step. */
void run_yield(run *r);

/* step.c: one worker step */
double step_compute(run *r, worker *w);
/* the same for a remote worker: its ops compute; < 0 when it is lost */
int step_compute_remote(run *r, worker *w);
/* After the compute, without the lock (the worker's own buffers): what of
 * the step is not finite, its batch loss ("loss") or the gradient it sends
 * ("gradient"), or NULL. */
const char *step_nonfinite(const run *r, const worker *w);
/* Then, lock held: 0 when what is NULL; else the run diverges
 * (run_diverge) and -1: the step is dropped, nothing of it reaches the
 * server. -1 too once the run has diverged. */
int step_check(run *r, worker *w, const char *what);
/* Begin a step: may the worker begin (the rule, a pause), take its batch,
 * read the weights it computes on. 1 if begun, 0 if it may not begin now,
 * -1 if the data is spent (the stop's epochs are all taken). */
int step_begin(run *r, worker *w);
/* The batch of w's step in flight, with its views' key. */
wbatch step_batch(const run *r, const worker *w);
/* The step's delivery delay in seconds (compute_s: measured compute time
 * on the wall clock, 0 on the virtual clock). */
double step_delay(run *r, worker *w, double compute_s);
/* Seconds a message of `bytes` takes on the worker's link (its latency
 * and bytes over its bandwidth; 0 for no message). */
double step_link_s(const worker *w, double bytes);
/* Deliver the gradient through the rule (step_can_push true). hogwild
 * steps the shared weights and drops the lock while it does. */
void step_deliver(run *r, worker *w);

/* What the rules' worker hooks may ask of the run (engine/ps/rule.h's
 * rule_ops: the default pull and delivery, the run's counts, its
 * divergence and failure, its lock), handed to them in r->rr. */
extern const rule_ops step_rule_ops;

/* The default pull: the server's weights, or under a version delay those
 * of an older version (w->rw.v_read is the version read). */
void step_pull_server(run *r, worker *w);
/* After the compute (lock held): release weights read in place. 0, or the
 * run failed (a copy on write could not be made). */
int step_computed(run *r, worker *w);
int step_can_begin(const run *r, const worker *w);
int step_can_push(const run *r, const worker *w);
int step_held_at_server(const run *r, const worker *w);
/* fail the run: the server could not take `what` (a gradient, a held
 * gradient, a model) from `worker` (ps_push's rc); returns rc */
int step_push_failed(run *r, int wid, const char *what, int rc);
SL_MUST_USE int step_hold(run *r, worker *w, double due);
SL_MUST_USE int step_release_held(run *r, int force);
int step_round_size(const run *r);
/* compression of a push (compress_push.c; docs/rules.md, "Compression"):
 * the bytes of a message of n floats under the run's compressor */
double step_push_size(const run *r, size_t n);
/* buf's floats from off on (the worker's memory) compressed in place,
 * with error feedback; a model as its difference from anchor (the
 * server's weights), a gradient (anchor NULL) as it is. 0, or the run
 * failed (< 0) */
int step_compress(run *r, worker *w, float *buf, size_t off, const float *anchor);
/* a rule of fragment rounds (RULE_FRAGMENTS) that a worker has begun
 * under: no worker may join it (workers.c) */
int run_fragments_fixed(const run *r);
/* the same on [off, off + len) alone */
int step_compress_range(run *r, worker *w, float *buf, size_t off, size_t len,
			const float *anchor);
/* after a change of the rule or its parameters: a change of the rule,
 * compress or ef zeroes every worker's residual (ratio alone keeps it) */
void step_compress_changed(run *r, const char *rule_before, const rule_params *before);
void step_version_changed(run *r);
void step_vhist_record(run *r);

/* workers.c */
int worker_new(run *r, int id, worker **out);
void worker_destroy(run *r, worker *w);
void workers_set(run *r, int n);
/* a remote worker was lost, or left when `left` (lock held): it leaves the
 * run, its step is dropped */
void workers_lose_remote(run *r, worker *w, int left);
/* a worker's delay, spb_depth, speed and paused from the run object
 * (the run's delay, then its override) */
void worker_settings(run *r, worker *w);

/* split_run.c: the data split. Parse cfg.data_split and make the split
 * for cfg.workers (run_new); 0 or -SL_EINVAL naming data_split. */
int split_run_init(run *r, char *err);
/* May the run have n workers under its split? (split_fits) */
int split_run_fits(const run *r, int n, char *err);
/* The worker count may have changed: a new split for it (the run fails
 * when none can be made), nothing under iid or when the count is the
 * split's; a split not yet told to cb.split is told. */
void split_run_refresh(run *r);
/* Up to want indices of w's part (a new epoch of it begun when spent). */
int split_take(run *r, worker *w, int want, uint32_t *idx);
/* A checkpoint loaded: the split of its split_n and split_gen made
 * again, then each worker's permutation of its epoch (saved: its place
 * pos in n samples). */
int split_run_restore(run *r, char *err);
int split_restore_worker(run *r, worker *w, uint32_t pos, uint32_t n, char *err);
/* each worker's part size and class counts into s (its workers filled;
 * s->classes allocated: none when out of memory) */
void split_snap(const run *r, run_snapshot *s);

/* command.c: control */
int cmd_drain(run *r);
int cmd_drain_queue(run *r);
int cmd_drain_schedule(run *r);
void cmd_ensure_vhist(run *r);

/* report.c: evaluation, stop, snapshots */
int report_eval_due(run *r);
int report_stop_met(run *r);
void report_evaluate(run *r);
void report_fill(run *r, run_eval *e);
void report_progress(run *r);
void report_publish(run *r);
/* r->cand (the state at version v) becomes the last good checkpoint */
void report_keep_good(run *r, uint64_t v);

/* clock_wall.c */
int wall_exec(run *r);
int wall_start_thread(run *r, worker *w);
void wall_fit_threads(run *r);

/* clock_virtual.c */
int virt_exec(run *r);
void virt_schedule(run *r, double t, int wid, int kind);

/* checkpoint.c */
void ckpt_save_state(run *r, blob *b);
void ckpt_serve(run *r);

#endif
