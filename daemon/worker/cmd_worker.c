/* cmd_worker.c - `stalelab worker`: a remote worker process (docs/remote.md).
 *
 * It connects to a daemon's --workers-listen socket (nanomsg REQ), says
 * hello, and from the welcome builds the run's model and loads its data
 * set itself; then, step after step, it asks for the weights (the daemon
 * answers with them, their version, the batch's sample indices and how
 * deep to backpropagate), computes the gradient and pushes it; under a
 * rule with phases (localsgd, diloco, async-diloco, easgd) it takes the
 * local step itself on weights it keeps, and pushes the model once a phase
 * (local_step; docs/remote.md, "Rules with phases"). Everything
 * else (the rule, the delays, pauses, partial backprop's depth, the
 * staleness) is the daemon's: the same step code drives local and remote
 * workers. A second socket sends a heartbeat every second, so the daemon
 * can tell a slow worker (it heartbeats while it computes) from a dead one,
 * and the worker can tell a dead daemon from a slow round. When the daemon
 * goes away, or the run changes, it says hello again; a refused hello (a
 * wrong token, another model) ends it. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <nanomsg/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "cmd_worker.h"
#include "config_json.h"
#include "dataset.h"
#include "model.h"
#include "optim.h"
#include "ps.h"
#include "wiremsg.h"
#include "sl.h"
#include "wire.h"
#include "wstep.h"

#define EXIT_REFUSED 78 /* EX_CONFIG: refused; retrying would not help */
#define POLL_MS 250
#define HB_EVERY_S 1.0

static const char worker_usage[] =
	"Usage: stalelab worker --connect URL [OPTIONS]\n"
	"\n"
	"A remote worker: connects to a daemon (stalelab serve --workers-listen),\n"
	"joins its run, loads the run's data set itself and computes gradients\n"
	"for it until stopped (SIGINT/SIGTERM) or refused; under localsgd,\n"
	"diloco, async-diloco, easgd and streaming-diloco it runs each phase of\n"
	"local steps itself and sends the model (or a fragment) when it ends.\n"
	"Its last line says what its link carried. Start many with a launcher:\n"
	"mpirun, srun, ssh. See docs/remote.md.\n"
	"\n"
	"  -C, --connect URL     the daemon: tcp://HOST:PORT (default port 8473) or\n"
	"                        ipc://PATH (else $STALELAB_PS)\n"
	"      --worker-id N     ask for this id (else $STALELAB_WORKER_ID,\n"
	"                        $OMPI_COMM_WORLD_RANK, $PMI_RANK, $SLURM_PROCID; else\n"
	"                        the daemon assigns one)\n"
	"  -t, --threads N       compute threads (default: all cores)\n"
	"      --token-file FILE the daemon's token is the first line of FILE (else\n"
	"                        $STALELAB_TOKEN)\n"
	"      --give-up S       exit 1 when no daemon answers for S seconds\n"
	"                        (default 0: keep trying)\n"
	"  -q, --quiet           only errors on stderr\n"
	"  -h, --help            this text\n"
	"\n"
	"Exit status: 0 stopped by a signal, 1 runtime failure (or --give-up),\n"
	"2 bad usage, 78 refused by the daemon (wrong token, another model).\n";

static atomic_int stop_flag;

static void
on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop_flag, 1);
}

/* SIGINT and SIGTERM are blocked in every thread of ours (nanomsg's
 * threads are made after, and inherit it), so no system call of theirs is
 * interrupted; this thread takes them. A thread made before main (the BLAS
 * library's) may still get one: on_signal then sets the same flag. */
static void *
sig_main(void *p)
{
	sigset_t *set = p;
	int sig;
	if (sigwait(set, &sig) == 0)
		on_signal(sig);
	return NULL;
}

typedef struct wk {
	int sock, quiet;
	const char *url;
	char token[512];
	int want_id, threads;
	const char *id_from; /* where want_id came from: "--worker-id", a variable */
	double give_up;
	uint32_t incarnation;
	/* from the welcome */
	uint32_t wid, epoch;
	uint64_t run_id;
	int run_worker;
	double timeout;
	run_config cfg;
	char data_spec[256];
	uint64_t data_seed;
	int data_ctx; /* the model's context the text set was cut for (0: images) */
	int have_data;
	dataset_pair data;
	backend *be;
	model *m;
	wire_model wm;
	/* the heartbeat thread: its socket, what it sends (hb_mu), what it saw */
	pthread_mutex_t hb_mu;
	pthread_t hb_th;
	int hb_live, hb_sock;
	int joined;              /* hb_mu: the ids below are a welcome's */
	_Atomic double hb_ok;    /* sl_now() of the last heartbeat answered */
	_Atomic double rtt_ms;   /* the last heartbeat's round trip (0: none yet) */
	atomic_int hb_refused;   /* the daemon no longer knows this worker */
	/* local steps (a rule with phases: WIRE_F_LOCAL): the weights of the
	 * phase in hand and the optimiser's state, both this process's own
	 * until the phase ends; the last step's number and loss, so that one
	 * received again is answered again, not taken twice */
	float *lw;
	int held;                /* lw holds the phase's weights */
	optim *opt;
	ps_layer *layers;
	int n_layers;
	uint64_t last_seq;
	double last_loss;
	int last_exchange;
	float *up;               /* the last exchange's ranges' floats (fragments) */
	uint64_t up_floats;      /* ... how many (0: it sent the whole model) */
	/* what the link carried, in payload bytes, for the last line */
	uint64_t steps, sent_bytes, recv_bytes;
	uint16_t push_flags;     /* the push being sent: WIRE_F_LOCAL, _MODEL */
} wk;

/* send one message (header fields from the welcome) */
static int
send_msg(wk *k, uint16_t kind, uint64_t seq, uint16_t lo, const void *a, size_t na,
	 const void *b, size_t nb)
{
	wire_hdr h = {.kind = kind, .worker_id = k->wid, .incarnation = k->incarnation,
		      .seq = seq, .run_id = k->run_id, .ps_epoch = k->epoch,
		      .model_fp = k->wm.model_fp, .layer_lo = lo,
		      .payload_len = (uint32_t)(na + nb), .send_ns = (uint64_t)(sl_now() * 1e9)};
	if (kind == WIRE_PUSH) {
		h.layer_hi = (uint16_t)k->wm.n_layers;
		h.flags = (uint16_t)((lo ? WIRE_F_PARTIAL : 0) | k->push_flags);
		k->sent_bytes += na + nb;
	}
	if (kind == WIRE_HELLO) {
		h.worker_id = k->want_id >= 0 ? (uint32_t)k->want_id : WIRE_ANY_ID;
		h.run_id = 0;
		h.model_fp = 0;
	}
	void *msg = wiremsg_new(&h, a, na, b, nb);
	if (!msg)
		return -1;
	if (nn_send(k->sock, &msg, NN_MSG, 0) < 0) {
		nn_freemsg(msg);
		return -1;
	}
	return 0;
}

/* the answer to the request in flight, within secs (0 on a signal or a
 * timeout: *buf NULL) */
static int
recv_msg(wk *k, double secs, void **buf)
{
	*buf = NULL;
	double until = sl_now() + secs;
	while (!atomic_load(&stop_flag) && sl_now() < until) {
		int n = nn_recv(k->sock, buf, NN_MSG, 0);
		if (n >= 0)
			return n;
		if (errno != ETIMEDOUT && errno != EAGAIN && errno != EINTR)
			return -1;
	}
	return 0;
}

static void say(const wk *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
say(const wk *k, const char *fmt, ...)
{
	if (k->quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "stalelab worker: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* a refusal's reason (or the parse error) */
static void
reason_of(const wire_hdr *h, const uint8_t *p, char *out, size_t cap)
{
	json_error_t je;
	json_t *d = json_loadb((const char *)p, h->payload_len, 0, &je);
	const char *r = d ? json_string_value(json_object_get(d, "reason")) : NULL;
	snprintf(out, cap, "%s", r ? r : "no reason given");
	json_decref(d);
}

/* take the welcome: the run, its data set, its model (0, or an exit code) */
/* the local steps' state let go */
static void
local_free(wk *k)
{
	if (k->opt) {
		optim_free(k->opt);
		free(k->opt);
		k->opt = NULL;
	}
	free(k->lw);
	free(k->layers);
	free(k->up);
	k->lw = NULL;
	k->layers = NULL;
	k->up = NULL;
	k->up_floats = 0;
	k->held = 0;
	k->last_seq = 0;
}

static int
welcome(wk *k, const wire_hdr *h, const uint8_t *p)
{
	json_error_t je;
	json_t *d = json_loadb((const char *)p, h->payload_len, 0, &je);
	json_t *robj = d ? json_object_get(d, "run") : NULL;
	const char *ds = d ? json_string_value(json_object_get(d, "dataset")) : NULL;
	const char *fp = d ? json_string_value(json_object_get(d, "model_fp")) : NULL;
	char err[SL_ERR_LEN] = "";
	run_config cfg;
	config_defaults(&cfg);
	if (!robj || !ds || !fp || config_apply_json(robj, &cfg, err) < 0) {
		fprintf(stderr, "stalelab worker: a welcome without a usable run: %s\n",
			err[0] ? err : je.text);
		json_decref(d);
		return 1;
	}
	k->wid = h->worker_id;
	k->epoch = h->ps_epoch;
	k->run_id = h->run_id;
	k->run_worker = (int)json_integer_value(json_object_get(d, "run_worker"));
	k->timeout = json_real_value(json_object_get(d, "timeout_s"));
	uint64_t seed = (uint64_t)json_integer_value(json_object_get(d, "data_seed"));
	int rc = 0;
	int ctx = model_spec_context(cfg.model);
	if (!k->have_data || strcmp(k->data_spec, ds) || k->data_seed != seed ||
	    k->data_ctx != ctx) {
		if (k->have_data)
			ds_pair_free(&k->data);
		k->have_data = 0;
		if (model_data_load(cfg.model, ds, seed, &k->data, err) < 0) {
			fprintf(stderr, "stalelab worker: data set %s: %s\n", ds, err);
			rc = 1;
		} else {
			k->have_data = 1;
			snprintf(k->data_spec, sizeof(k->data_spec), "%s", ds);
			k->data_seed = seed;
			k->data_ctx = ctx;
		}
	}
	if (rc == 0 && (!k->m || strcmp(k->cfg.model, cfg.model) || k->m->batch_cap < cfg.batch)) {
		model_free(k->m);
		k->m = NULL;
		const dataset *tr = &k->data.train;
		if (model_new(cfg.model, tr->c, tr->h, tr->w, tr->classes, cfg.batch, 1, k->be,
			      &k->m, err) < 0) {
			fprintf(stderr, "stalelab worker: model %s: %s\n", cfg.model, err);
			rc = 1;
		}
	}
	if (rc == 0) {
		/* a phase in hand, and the optimiser's state, are the last
		 * run's or connection's: a new one starts afresh */
		local_free(k);
		if (!(k->layers = malloc(sizeof(ps_layer) * MODEL_MAX_NODES))) {
			fprintf(stderr, "stalelab worker: out of memory\n");
			rc = 1;
		} else {
			k->n_layers = ps_model_layers(k->m, k->layers, MODEL_MAX_NODES);
		}
	}
	if (rc == 0) {
		k->cfg = cfg;
		wire_model wm = {.n_params = k->m->n_params, .n_layers = k->m->n_param_layers,
				 .run_id = k->run_id};
		for (int l = 1; l <= k->m->n_param_layers; l++)
			wm.layer_off[k->m->n_param_layers - l] = model_tail_offset(k->m, l);
		wm.layer_off[0] = 0;
		wm.layer_off[k->m->n_param_layers] = k->m->n_params;
		wm.model_fp = wire_fingerprint(cfg.model, ds, &wm);
		k->wm = wm;
		char mine[24];
		snprintf(mine, sizeof(mine), "%016llx", (unsigned long long)wm.model_fp);
		if (strcmp(mine, fp) || h->model_fp != wm.model_fp) {
			fprintf(stderr, "stalelab worker: refused: the daemon's model %s has "
				"fingerprint %s, this build computes %s for it (run the same "
				"stalelab version on both sides)\n", cfg.model, fp, mine);
			rc = EXIT_REFUSED;
		}
	}
	/* two numbers: the row it is in the run (worker N of /status, the
	 * dashboard, the log) and the id it has across reconnects (the
	 * launcher's rank, --worker-id, or one the daemon gave) */
	if (rc == 0 && !k->quiet)
		fprintf(stderr, "stalelab worker: joined run %llu at %s as the run's worker %d "
			"(remote id %u, %s): %s on %s, %d thread%s\n", (unsigned long long)k->run_id,
			k->url, k->run_worker, k->wid, k->id_from ? k->id_from : "given by the daemon",
			cfg.model, ds, k->threads, k->threads == 1 ? "" : "s");
	json_decref(d);
	return rc;
}

/* every second, while joined: a heartbeat on its own socket; an answer
 * (CTRL) says the daemon is there, a refusal that it let this worker go */
static void *
hb_main(void *p)
{
	wk *k = p;
	while (!atomic_load(&stop_flag)) {
		pthread_mutex_lock(&k->hb_mu);
		int joined = k->joined;
		wire_hdr h = {.kind = WIRE_HB, .worker_id = k->wid, .incarnation = k->incarnation,
			      .run_id = k->run_id, .ps_epoch = k->epoch, .model_fp = k->wm.model_fp};
		pthread_mutex_unlock(&k->hb_mu);
		double t0 = sl_now();
		if (joined) {
			/* the last round trip, for the daemon's tables */
			char doc[64] = "";
			double rtt = atomic_load(&k->rtt_ms);
			if (rtt > 0)
				snprintf(doc, sizeof(doc), "{\"rtt_ms\":%.4f}", rtt);
			void *msg = wiremsg_new(&h, doc, strlen(doc), NULL, 0), *buf = NULL;
			if (msg && nn_send(k->hb_sock, &msg, NN_MSG, 0) < 0)
				nn_freemsg(msg);
			int n = nn_recv(k->hb_sock, &buf, NN_MSG, 0); /* RCVTIMEO: a second */
			wire_hdr r;
			const uint8_t *pl;
			char err[SL_ERR_LEN];
			if (n >= 0 && wire_parse(buf, (size_t)n, NULL, &r, &pl, err) == 0) {
				if (r.kind == WIRE_CTRL) {
					atomic_store(&k->hb_ok, sl_now());
					atomic_store(&k->rtt_ms, 1000 * (sl_now() - t0));
				}
				else if (r.kind == WIRE_REFUSE)
					atomic_store(&k->hb_refused, 1);
			}
			if (n >= 0)
				nn_freemsg(buf);
		}
		double left = HB_EVERY_S - (sl_now() - t0);
		if (left > 0)
			usleep((useconds_t)(left * 1e6));
	}
	return NULL;
}

/* the answer to a step's request: > 0 its length, 0 when the daemon is
 * gone (no heartbeat answered for its timeout), let this worker go, or a
 * signal came */
static int
step_answer(wk *k, void **buf)
{
	*buf = NULL;
	double dead = k->timeout > 1 ? k->timeout : 1;
	while (!atomic_load(&stop_flag)) {
		int n = nn_recv(k->sock, buf, NN_MSG, 0);
		if (n >= 0)
			return n;
		if (errno != ETIMEDOUT && errno != EAGAIN && errno != EINTR)
			return 0;
		if (atomic_load(&k->hb_refused)) {
			say(k, "the daemon let this worker go: saying hello again");
			return 0;
		}
		if (sl_now() - atomic_load(&k->hb_ok) > dead) {
			say(k, "no heartbeat answered by %s for %g s: saying hello again", k->url, dead);
			return 0;
		}
	}
	return 0;
}

/* step_answer for steps(): > 0 the answer's length, else 0 (stop
 * stepping: a signal, the daemon gone or letting go); nothing to free then */
static int
answer(wk *k, void **buf)
{
	int n = step_answer(k, buf);
	if (n > 0 && !atomic_load(&stop_flag))
		return n;
	if (n > 0)
		nn_freemsg(*buf);
	*buf = NULL;
	return 0;
}

/* hello until welcomed: 0, or an exit code */
static int
join(wk *k)
{
	char host[64] = "";
	gethostname(host, sizeof(host) - 1);
	json_t *doc = json_pack("{s:s,s:i,s:i}", "host", host, "threads", k->threads, "pid",
				(int)getpid());
	if (k->token[0])
		json_object_set_new(doc, "token", json_string(k->token));
	if (k->want_id >= 0)
		json_object_set_new(doc, "worker_id", json_integer(k->want_id));
	char *text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	double start = sl_now();
	int waiting = 0, rc = -1;
	while (rc < 0 && !atomic_load(&stop_flag)) {
		if (send_msg(k, WIRE_HELLO, 0, 0, text, strlen(text), NULL, 0) < 0) {
			fprintf(stderr, "stalelab worker: cannot send: %s\n", nn_strerror(errno));
			rc = 1;
			break;
		}
		void *buf;
		int n = recv_msg(k, 2.0, &buf);
		if (n <= 0) {
			if (!waiting++)
				say(k, "waiting for the daemon at %s", k->url);
			if (k->give_up > 0 && sl_now() - start > k->give_up) {
				fprintf(stderr, "stalelab worker: no daemon answered at %s in %g s "
					"(--give-up)\n", k->url, k->give_up);
				rc = 1;
			}
			continue;
		}
		wire_hdr h = {0};
		const uint8_t *p;
		char err[SL_ERR_LEN];
		if (wire_parse(buf, (size_t)n, NULL, &h, &p, err) < 0) {
			fprintf(stderr, "stalelab worker: the daemon's answer: %s\n", err);
			rc = 1;
		} else if (h.kind == WIRE_REFUSE) {
			char why[SL_ERR_LEN];
			reason_of(&h, p, why, sizeof(why));
			fprintf(stderr, "stalelab worker: refused by %s: %s\n", k->url, why);
			rc = EXIT_REFUSED;
		} else if (h.kind == WIRE_WELCOME) {
			pthread_mutex_lock(&k->hb_mu);
			rc = welcome(k, &h, p);
			k->joined = rc == 0;
			pthread_mutex_unlock(&k->hb_mu);
			atomic_store(&k->hb_ok, sl_now());
			atomic_store(&k->hb_refused, 0);
		}
		nn_freemsg(buf);
	}
	free(text);
	return atomic_load(&stop_flag) ? 0 : rc;
}

/* A local step (WIRE_F_LOCAL): from the weights that came with it, or on
 * from the phase's in hand, a step of the optimiser the daemon named on
 * this process's own weights, through the same optim_local_step as a
 * worker in the daemon (the same bits). Its loss, and whether the model
 * goes back, in k->last_*. A step received again (its push's answer was
 * lost) is not taken again. 0; -1 to say hello again; an exit code. */
static int
local_step(wk *k, const wire_hdr *h, const wire_local *wl, const wire_ranges *wr,
	   const float *weights, const wbatch *b, int depth)
{
	size_t np = k->m->n_params;
	if (h->seq && h->seq == k->last_seq)
		return 0; /* answered again below from what it kept */
	if ((!k->lw && !(k->lw = malloc(sizeof(float) * np))) ||
	    (!k->up && !(k->up = malloc(sizeof(float) * np)))) {
		fprintf(stderr, "stalelab worker: out of memory for the phase's weights\n");
		return 1;
	}
	if (h->flags & WIRE_F_MODEL) {
		memcpy(k->lw, weights, sizeof(float) * np);
		k->held = 1;
	} else if (!k->held) {
		say(k, "a local step without the phase's weights: saying hello again");
		return -1;
	}
	/* the global fragments it took, mixed into its own weights */
	const uint8_t *down = wr->pairs ? wr->pairs + 8 * (size_t)(wr->n_up + wr->n_down) : NULL;
	for (uint32_t i = 0; i < wr->n_down; i++) {
		uint64_t o, n;
		wire_range_at(wr, wr->n_up + i, &o, &n);
		float *g = k->up; /* scratch: the floats aligned */
		memcpy(g, down, sizeof(float) * n);
		optim_mix(k->be, k->lw + o, g, n, wr->mix);
		down += sizeof(float) * n;
	}
	if ((wl->lflags & WIRE_L_RESET) && k->opt)
		optim_reset(k->opt);
	double loss = wstep(k->m, &k->data.train, k->lw, b, depth);
	opt_cfg oc = {.kind = wl->opt, .beta1 = wl->beta1, .beta2 = wl->beta2, .eps = wl->eps,
		      .clip = wl->clip};
	if (optim_local_step(&k->opt, k->be, k->lw, k->m->grads, model_tail_offset(k->m, depth),
			     np, k->layers, k->n_layers, &oc, wl->lr, wl->mu, wl->wd) < 0) {
		fprintf(stderr, "stalelab worker: out of memory for the optimiser's state\n");
		return 1;
	}
	k->last_seq = h->seq;
	k->last_loss = loss;
	k->last_exchange = (wl->lflags & WIRE_L_EXCHANGE) != 0;
	k->up_floats = 0;
	if (k->last_exchange && wr->n_up) { /* the fragment it sends */
		for (uint32_t i = 0; i < wr->n_up; i++) {
			uint64_t o, n;
			wire_range_at(wr, i, &o, &n);
			memcpy(k->up + k->up_floats, k->lw + o, sizeof(float) * n);
			k->up_floats += n;
		}
	} else if (k->last_exchange) {
		k->held = 0; /* the next phase starts from the weights sent with it */
	}
	return 0;
}

/* steps until the daemon refuses or goes away (0: say hello again), a
 * signal (0 with stop_flag) or a failure (an exit code) */
static int
steps(wk *k)
{
	void *buf = NULL;
	int n = 0;
	for (;;) {
		if (!buf) { /* no weights in hand: ask for them */
			if (send_msg(k, WIRE_PULL, 0, 0, NULL, 0, NULL, 0) < 0 ||
			    (n = answer(k, &buf)) == 0)
				return 0;
		}
		wire_hdr h = {0};
		const uint8_t *p;
		char err[SL_ERR_LEN];
		if (wire_parse(buf, (size_t)n, &k->wm, &h, &p, err) < 0 || h.kind != WIRE_WEIGHTS) {
			char why[SL_ERR_LEN];
			if (h.kind == WIRE_REFUSE)
				reason_of(&h, p, why, sizeof(why));
			say(k, "%s: %s: saying hello again", h.kind == WIRE_REFUSE ? "refused" :
			    "a bad answer", h.kind == WIRE_REFUSE ? why : err);
			nn_freemsg(buf);
			return 0;
		}
		size_t np = k->m->n_params;
		k->recv_bytes += h.payload_len;
		/* a local step: its settings first, the weights only when its
		 * phase starts from them */
		int local = (h.flags & WIRE_F_LOCAL) != 0, with_w = !local || (h.flags & WIRE_F_MODEL);
		wire_local wl = {0};
		if (local && wire_local_get(p, &wl, err) < 0) {
			say(k, "a bad local step: %s: saying hello again", err);
			nn_freemsg(buf);
			return 0;
		}
		wire_ranges wr = {0};
		if ((h.flags & WIRE_F_RANGES) &&
		    wire_ranges_get(p + WIRE_LOCAL_LEN, h.payload_len - WIRE_LOCAL_LEN, np, &wr,
				    err) < 0) {
			say(k, "a bad local step: %s: saying hello again", err);
			nn_freemsg(buf);
			return 0;
		}
		const uint8_t *q = p + (local ? WIRE_LOCAL_LEN + wr.bytes : 0);
		size_t wbytes = with_w ? 4 * np : 0;
		int batch = (int)((h.payload_len - (size_t)(q - p) - wbytes) / 4);
		if (batch > k->m->batch_cap) { /* the run's batch grew */
			model *m2;
			const dataset *tr = &k->data.train;
			if (model_new(k->cfg.model, tr->c, tr->h, tr->w, tr->classes, batch, 1, k->be,
				      &m2, err) < 0) {
				fprintf(stderr, "stalelab worker: batch %d: %s\n", batch, err);
				nn_freemsg(buf);
				return 1;
			}
			model_free(k->m);
			k->m = m2;
		}
		int L = k->wm.n_layers, depth = h.layer_lo ? L - h.layer_lo : 0;
		const float *weights = (const float *)q;
		const uint32_t *idx = (const uint32_t *)(q + wbytes);
		for (int i = 0; i < batch; i++)
			if (idx[i] >= (uint32_t)k->data.train.n) {
				fprintf(stderr, "stalelab worker: sample %u out of the data set's %d\n",
					idx[i], k->data.train.n);
				nn_freemsg(buf);
				return 0;
			}
		/* the views of the batch: the daemon's key, the run's seed */
		wbatch b = {.idx = idx, .n = batch};
		wiremsg_get_aug(&h, k->cfg.seed, &b.aug);
		uint64_t seq = h.seq;
		uint16_t lo = h.layer_lo;
		int rc;
		if (local) {
			rc = local_step(k, &h, &wl, &wr, weights, &b, depth);
			nn_freemsg(buf);
			buf = NULL;
			if (rc != 0)
				return rc < 0 ? 0 : rc;
			/* its loss; the model, or the fragment, that ends a phase */
			int frag = k->last_exchange && k->up_floats;
			k->push_flags = (uint16_t)(WIRE_F_LOCAL | (!k->last_exchange ? 0 :
								   frag ? WIRE_F_RANGES : WIRE_F_MODEL));
			rc = send_msg(k, WIRE_PUSH, seq, lo, &k->last_loss, sizeof(double),
				      frag ? k->up : k->last_exchange ? k->lw : NULL,
				      frag ? sizeof(float) * k->up_floats :
				      k->last_exchange ? sizeof(float) * np : 0);
		} else {
			double loss = wstep(k->m, &k->data.train, weights, &b, depth);
			size_t off = model_tail_offset(k->m, depth);
			nn_freemsg(buf);
			buf = NULL;
			k->held = 0; /* a gradient step: no phase in hand */
			k->push_flags = 0;
			rc = send_msg(k, WIRE_PUSH, seq, lo, &loss, sizeof(loss), k->m->grads + off,
				      sizeof(float) * (np - off));
		}
		k->steps++;
		if (rc < 0)
			return 0;
		/* the answer: the next step's weights, sent behind the push (or
		 * an ack, when the push was one applied before: then pull) */
		if ((n = answer(k, &buf)) == 0)
			return 0;
		int parsed = wire_parse(buf, (size_t)n, &k->wm, &h, &p, err) == 0;
		if (parsed && h.kind == WIRE_WEIGHTS)
			continue; /* the next step, in hand */
		if (!parsed || h.kind != WIRE_ACK) {
			char why[SL_ERR_LEN] = "";
			if (parsed && h.kind == WIRE_REFUSE)
				reason_of(&h, p, why, sizeof(why));
			say(k, "%s: %s: saying hello again", parsed && h.kind == WIRE_REFUSE ?
			    "the push was refused" : "a bad answer to the push", parsed ? why : err);
			nn_freemsg(buf);
			return 0;
		}
		nn_freemsg(buf);
		buf = NULL;
	}
}

/* the launcher's rank (mpirun, srun, PMI) or STALELAB_WORKER_ID; *from
 * names the variable */
static int
rank_from_env(const char **from)
{
	static const char *const vars[] = {"$STALELAB_WORKER_ID", "$OMPI_COMM_WORLD_RANK",
					   "$PMI_RANK", "$SLURM_PROCID"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i] + 1);
		unsigned long long u;
		if (v && cli_u64(v, &u) == 0 && u < 4096) {
			*from = vars[i];
			return (int)u;
		}
	}
	return -1;
}

#define WORKER_GO (-1)

/* argv (and $STALELAB_PS, $STALELAB_TOKEN, the launcher's rank) into k,
 * checked: WORKER_GO, or the exit code (0 after --help, 2 bad usage, the
 * message printed) */
static int
worker_parse(int argc, char **argv, wk *k)
{
	enum { O_WORKER_ID = 256, O_TOKEN_FILE, O_GIVE_UP };
	static const struct option opts[] = {
		{"connect", required_argument, NULL, 'C'},
		{"worker-id", required_argument, NULL, O_WORKER_ID},
		{"threads", required_argument, NULL, 't'},
		{"token-file", required_argument, NULL, O_TOKEN_FILE},
		{"give-up", required_argument, NULL, O_GIVE_UP},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *token_file = NULL;
	unsigned long long u;
	char err[SL_ERR_LEN];
	int opt, rc = 0;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":C:t:qh", opts, NULL)) != -1) {
		switch (opt) {
		case 'C': k->url = optarg; break;
		case 'q': k->quiet = 1; break;
		case O_TOKEN_FILE: token_file = optarg; break;
		case O_WORKER_ID:
			if ((rc = cli_opt_u64("worker-id", optarg, 0, 4095, &u, err)) == 0) {
				k->want_id = (int)u;
				k->id_from = "--worker-id";
			}
			break;
		case 't':
			if ((rc = cli_opt_u64("threads", optarg, 1, 256, &u, err)) == 0)
				k->threads = (int)u;
			break;
		case O_GIVE_UP:
			rc = cli_opt_double("give-up", optarg,
					    (cli_range){.lo = 0, .hi = INFINITY, .what = "seconds"},
					    &k->give_up, err);
			break;
		case 'h': fputs(worker_usage, stdout); return 0;
		default: return cli_bad_option("worker", opt, argv, opts);
		}
		if (rc < 0)
			return cli_usage_error("worker", err);
	}
	if (optind < argc) {
		fprintf(stderr, "stalelab worker: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!k->url)
		k->url = getenv("STALELAB_PS");
	if (!k->url || !*k->url) {
		fprintf(stderr, "stalelab worker: which daemon? --connect tcp://HOST:8473 (or "
			"$STALELAB_PS); see stalelab worker --help\n");
		return 2;
	}
	if (strncmp(k->url, "tcp://", 6) && strncmp(k->url, "ipc://", 6)) {
		fprintf(stderr, "stalelab worker: --connect %s: expected tcp://HOST:PORT or "
			"ipc://PATH\n", k->url);
		return 2;
	}
	if (k->want_id < 0)
		k->want_id = rank_from_env(&k->id_from);
	if (token_file) {
		FILE *f = fopen(token_file, "r");
		if (!f) {
			fprintf(stderr, "stalelab worker: --token-file %s: %s\n", token_file,
				strerror(errno));
			return 2;
		}
		size_t n = fread(k->token, 1, sizeof(k->token) - 1, f);
		fclose(f);
		k->token[n] = 0;
		k->token[strcspn(k->token, "\r\n")] = 0;
	} else if (getenv("STALELAB_TOKEN")) {
		snprintf(k->token, sizeof(k->token), "%s", getenv("STALELAB_TOKEN"));
	}
	return WORKER_GO;
}

int
cmd_worker(int argc, char **argv)
{
	wk k;
	memset(&k, 0, sizeof(k));
	k.want_id = -1;
	k.sock = k.hb_sock = -1;
	int code = worker_parse(argc, argv, &k);
	if (code != WORKER_GO)
		return code;
	if (!k.threads)
		k.threads = cli_ncpu();
	char err[SL_ERR_LEN];
	if (backend_open("cpu", k.threads, &k.be, err) < 0) {
		fprintf(stderr, "stalelab worker: %s\n", err);
		return 1;
	}
	if (getrandom(&k.incarnation, sizeof(k.incarnation), 0) != sizeof(k.incarnation))
		k.incarnation = (uint32_t)getpid() ^ (uint32_t)(sl_now() * 1e6);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	static sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	pthread_t sig_th;
	if (pthread_create(&sig_th, NULL, sig_main, &sigs) == 0)
		pthread_detach(sig_th);
	k.sock = nn_socket(AF_SP, NN_REQ);
	/* its receive limit is the most a daemon allows (serve --workers-max-mib
	 * sizes the daemon's and refuses a model that needs more) */
	int ms = POLL_MS, sndms = 5000, max = 2047 << 20, ivl = 100, ivl_max = 2000;
	nn_setsockopt(k.sock, NN_SOL_SOCKET, NN_RCVTIMEO, &ms, sizeof(ms));
	nn_setsockopt(k.sock, NN_SOL_SOCKET, NN_SNDTIMEO, &sndms, sizeof(sndms));
	nn_setsockopt(k.sock, NN_SOL_SOCKET, NN_RCVMAXSIZE, &max, sizeof(max));
	nn_setsockopt(k.sock, NN_SOL_SOCKET, NN_RECONNECT_IVL, &ivl, sizeof(ivl));
	nn_setsockopt(k.sock, NN_SOL_SOCKET, NN_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max));
	pthread_mutex_init(&k.hb_mu, NULL);
	k.hb_sock = nn_socket(AF_SP, NN_REQ);
	int hbms = 1000;
	nn_setsockopt(k.hb_sock, NN_SOL_SOCKET, NN_RCVTIMEO, &hbms, sizeof(hbms));
	nn_setsockopt(k.hb_sock, NN_SOL_SOCKET, NN_SNDTIMEO, &hbms, sizeof(hbms));
	nn_setsockopt(k.hb_sock, NN_SOL_SOCKET, NN_RECONNECT_IVL, &ivl, sizeof(ivl));
	nn_setsockopt(k.hb_sock, NN_SOL_SOCKET, NN_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max));
	if (k.sock < 0 || nn_connect(k.sock, k.url) < 0 || k.hb_sock < 0 ||
	    nn_connect(k.hb_sock, k.url) < 0) {
		fprintf(stderr, "stalelab worker: --connect %s: %s\n", k.url, nn_strerror(errno));
		code = 2;
	} else {
		k.hb_live = pthread_create(&k.hb_th, NULL, hb_main, &k) == 0;
		code = 0;
		while (!atomic_load(&stop_flag)) {
			if ((code = join(&k)) != 0 || atomic_load(&stop_flag))
				break;
			if ((code = steps(&k)) != 0)
				break;
		}
		if (atomic_load(&stop_flag)) {
			/* best effort: the daemon lets this worker go at once */
			send_msg(&k, WIRE_BYE, 0, 0, "{}", 2, NULL, 0);
			/* its answer, half a second at most: waited for, not read.
			 * Reading it aborted in nanomsg 1.1.5 now and then (the
			 * answer's chunk failing its tag check in nn_recv, once in
			 * a `make bench` of 20 remote rounds); the process ends
			 * next, and the message with it. */
			struct nn_pollfd pfd = {.fd = k.sock, .events = NN_POLLIN};
			nn_poll(&pfd, 1, 500);
			say(&k, "stopped");
			code = 0;
		}
	}
	/* what the link carried: a gradient a step, or under a rule with
	 * phases the model once a phase (docs/remote.md) */
	if (k.steps)
		say(&k, "%llu steps: %llu bytes pushed, %llu bytes of steps received",
		    (unsigned long long)k.steps, (unsigned long long)k.sent_bytes,
		    (unsigned long long)k.recv_bytes);
	atomic_store(&stop_flag, 1);
	if (k.hb_live)
		pthread_join(k.hb_th, NULL);
	pthread_mutex_destroy(&k.hb_mu);
	/* The REQ sockets are left to the process's end, which closes their
	 * connections: nanomsg 1.1.5 aborts in nn_close now and then (a chunk
	 * freed twice in nn_req_term, in its own thread, after the socket's
	 * shutdown): in 3 of 8 runs where the daemon and the worker were
	 * stopped together when only a socket with its BYE unanswered was
	 * spared; then in 1 of `make bench`'s 9 remote rounds (workers
	 * stopped by SIGTERM, the daemon up), and again with the heartbeat's
	 * socket spared too when its last request was unanswered; in none of
	 * 18 with neither closed. Nothing is lost: the daemon has had the
	 * BYE, or sees the connection go. */
	local_free(&k);
	model_free(k.m);
	if (k.have_data)
		ds_pair_free(&k.data);
	backend_free(k.be);
	return code;
}
