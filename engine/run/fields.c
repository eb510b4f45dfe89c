/* fields.c - the descriptor tables of the run object and the checks that
 * follow from them. */
#include "fields.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "augment.h"
#include "backend.h"
#include "compress.h"
#include "dct.h"
#include "model.h"

#define NF(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define BOTH (FD_MIN | FD_MAX)
#define RC offsetof(run_cmd, rp)

static const char *const clocks[] = {"wall", "virtual", NULL};
static const char *const dists[] = {"none", "const", "uniform", "exp",
	"lognormal", "pareto", "version", NULL};
static const char *const wheres[] = {"worker", "server", NULL};
static const char *const local_opts[] = {"sgd", "cadcasgd", NULL};
static const char *const weightings[] = {"none", "poly", NULL};
static const char *const outer_opts[] = {"nesterov", "momentum", "sgd", NULL};
/* in opt_kind's order, and sched_kind's (ps_config.h) */
static const char *const optimizers[] = {"sgd", "momentum", "nesterov", "adam", "adamw", NULL};
static const char *const sched_kinds[] = {"constant", "cosine", "linear", "step", NULL};

/* ---- delay --------------------------------------------------------------- */

#define DM(d) (1u << (d))
#define TIMED (DM(DELAY_CONST) | DM(DELAY_UNIFORM) | DM(DELAY_EXP) | \
	       DM(DELAY_LOGNORMAL) | DM(DELAY_PARETO))
#define DOFF(m) offsetof(delay_cfg, m)

static const field_desc delay_f[] = {
	{.key = "dist", .type = FT_STRING, .store = FS_ENUM, .off = DOFF(dist),
	 .choices = dists, .stride = sizeof(char *), .def = DELAY_NONE,
	 .doc = "distribution of the injected delay; version draws the staleness itself from U{0..s}"},
	{.key = "mean_ms", .type = FT_NUMBER, .store = FS_DBL, .off = DOFF(mean_ms),
	 .min = 0, .max = 3600e3, .flags = BOTH, .when_key = "dist", .when_mask = TIMED,
	 .doc = "mean delay in milliseconds"},
	{.key = "sigma", .type = FT_NUMBER, .store = FS_DBL, .off = DOFF(sigma),
	 .min = 0, .max = 10, .flags = BOTH | FD_MIN_OPEN, .def = 1,
	 .when_key = "dist", .when_mask = DM(DELAY_LOGNORMAL),
	 .doc = "lognormal shape (sigma of the underlying normal)"},
	{.key = "alpha", .type = FT_NUMBER, .store = FS_DBL, .off = DOFF(alpha),
	 .min = 1, .max = 100, .flags = BOTH | FD_MIN_OPEN, .def = 2.5,
	 .when_key = "dist", .when_mask = DM(DELAY_PARETO),
	 .doc = "pareto shape (> 1: a finite mean)"},
	{.key = "spread", .type = FT_NUMBER, .store = FS_DBL, .off = DOFF(spread),
	 .min = 0, .max = 1, .flags = BOTH, .def = 1,
	 .when_key = "dist", .when_mask = DM(DELAY_UNIFORM),
	 .doc = "uniform: half-width as a fraction of the mean"},
	{.key = "s", .type = FT_INTEGER, .store = FS_INT, .off = DOFF(s),
	 .min = 0, .max = 64, .flags = BOTH, .def = 0,
	 .when_key = "dist", .when_mask = DM(DELAY_VERSION),
	 .doc = "version: largest staleness drawn"},
	{.key = "where", .type = FT_STRING, .store = FS_ENUM, .off = DOFF(at_server),
	 .choices = wheres, .stride = sizeof(char *), .flags = FD_SPARSE,
	 .doc = "worker: the worker sleeps; server: the gradient is held at the server"},
	{.key = "bandwidth_mbps", .type = FT_NUMBER, .store = FS_DBL,
	 .off = DOFF(bandwidth_mbps), .min = 0, .max = 1e9, .flags = BOTH | FD_SPARSE,
	 .doc = "link bandwidth for the gradient's bytes (0: infinite)"},
};
const field_table fields_delay = {delay_f, NF(delay_f)};

/* ---- link ------------------------------------------------------------------ */

#define LOFF(m) offsetof(link_cfg, m)

static const field_desc link_f[] = {
	{.key = "latency_ms", .type = FT_NUMBER, .store = FS_DBL, .off = LOFF(latency_ms),
	 .min = 0, .max = 3600e3, .flags = BOTH | FD_SPARSE,
	 .doc = "one-way latency of each message to or from the server, in milliseconds"},
	{.key = "bandwidth_mbps", .type = FT_NUMBER, .store = FS_DBL,
	 .off = LOFF(bandwidth_mbps), .min = 0, .max = 1e9, .flags = BOTH | FD_SPARSE,
	 .doc = "the link's bandwidth in megabits per second, for the bytes each step "
		"pulls and pushes (0: infinite)"},
};
const field_table fields_link = {link_f, NF(link_f)};

/* ---- lr_schedule ----------------------------------------------------------- */

#define SOFF(m) offsetof(lr_sched, m)
#define SM(k) (1u << (k))

static const field_desc sched_f[] = {
	{.key = "kind", .type = FT_STRING, .store = FS_ENUM, .off = SOFF(kind),
	 .choices = sched_kinds, .stride = sizeof(char *), .def = SCHED_CONSTANT, .flags = FD_SPARSE,
	 .doc = "after the warm-up: constant, cosine or linear decay to floor x lr at "
		"decay_updates, or step (x gamma every step_every updates)"},
	{.key = "warmup", .type = FT_INTEGER, .store = FS_DBL, .off = SOFF(warmup),
	 .min = 0, .max = 1e12, .flags = BOTH | FD_SPARSE,
	 .doc = "updates of linear warm-up: update i (from 0) runs at lr (i+1)/(warmup+1)"},
	{.key = "decay_updates", .type = FT_INTEGER, .store = FS_DBL,
	 .off = SOFF(decay_updates), .min = 0, .max = 1e12, .flags = BOTH,
	 .when_key = "kind", .when_mask = SM(SCHED_COSINE) | SM(SCHED_LINEAR),
	 .doc = "the update at which the decay reaches the floor (past the warm-up)"},
	{.key = "floor", .type = FT_NUMBER, .store = FS_DBL, .off = SOFF(floor),
	 .min = 0, .max = 1, .flags = BOTH, .def = 0.1,
	 .when_key = "kind", .when_mask = SM(SCHED_COSINE) | SM(SCHED_LINEAR) | SM(SCHED_STEP),
	 .doc = "the lowest lr, as a fraction of lr"},
	{.key = "step_every", .type = FT_INTEGER, .store = FS_DBL, .off = SOFF(step_every),
	 .min = 1, .max = 1e12, .flags = BOTH, .def = 1000,
	 .when_key = "kind", .when_mask = SM(SCHED_STEP),
	 .doc = "step: updates between two cuts"},
	{.key = "gamma", .type = FT_NUMBER, .store = FS_DBL, .off = SOFF(gamma),
	 .min = 0, .max = 1, .flags = BOTH | FD_MIN_OPEN, .def = 0.1,
	 .when_key = "kind", .when_mask = SM(SCHED_STEP),
	 .doc = "step: the factor of each cut"},
};
const field_table fields_sched = {sched_f, NF(sched_f)};

/* ---- rule_params ----------------------------------------------------------- */

#define RP(m) offsetof(rule_params, m)
#define RPF(k, t, st, lo, hi, fl, d, dc)                                     \
	{.key = #k, .type = t, .store = st, .off = RP(k), .min = lo, .max = hi,  \
	 .flags = (fl), .def = d, .doc = dc}

static const field_desc rp_f[] = {
	RPF(s, FT_INTEGER, FS_DBL, 0, 1e6, BOTH, 3,
	    "ssp: how many clocks a worker may run ahead of the slowest"),
	RPF(lambda, FT_NUMBER, FS_DBL, 0, 1e6, BOTH, 0.04,
	    "dcasgd (and odsgd's cadcasgd): delay-compensation strength"),
	RPF(H, FT_INTEGER, FS_DBL, 1, 1e6, BOTH, 8,
	    "localsgd, diloco: local steps between averages"),
	RPF(n, FT_INTEGER, FS_DBL, 1, 256, BOTH, 2,
	    "softsync: a round is max(1, floor(N/n)) gradients"),
	RPF(local_lr, FT_NUMBER, FS_DBL, 0, 100, BOTH | FD_MIN_OPEN, 0.1,
	    "odsgd: local step size (divided by N)"),
	RPF(m, FT_NUMBER, FS_DBL, 0, 1, BOTH | FD_MAX_OPEN, 0.95,
	    "dcasgd adaptive (and cadcasgd): decay of the mean square"),
	RPF(beta, FT_NUMBER, FS_DBL, 0, 1e3, BOTH, 0.9,
	    "easgd: elastic strength (alpha = beta/N)"),
	RPF(period, FT_INTEGER, FS_DBL, 1, 1e6, BOTH, 10,
	    "easgd: local steps between elastic exchanges"),
	RPF(warmup, FT_INTEGER, FS_DBL, 0, 1e9, BOTH, 200,
	    "odsgd: a worker's iterations of plain ssgd before the local steps"),
	RPF(outer_lr, FT_NUMBER, FS_DBL, 0, 100, BOTH | FD_MIN_OPEN, 0.7,
	    "diloco, async-diloco: the outer (server) step size on the pseudo-gradient"),
	RPF(outer_momentum, FT_NUMBER, FS_DBL, 0, 1, BOTH | FD_MAX_OPEN, 0.9,
	    "diloco, async-diloco: the outer Nesterov momentum (0: plain outer SGD)"),
	RPF(dn_period, FT_INTEGER, FS_DBL, 1, 1e6, BOTH, 1,
	    "async-diloco: Delayed Nesterov, the momentum applied every N arrivals "
	    "(1: every arrival, the naive form)"),
	RPF(grace_ms, FT_NUMBER, FS_DBL, 0, 1e9, BOTH, 0,
	    "async-diloco: the grace window in ms (the asynchronous local-SGD notebook's 500): "
	    "a worker whose pseudo-gradient lands within it of the arrival that opened it waits, "
	    "and every such worker starts its next phase when the last of them has landed "
	    "(0: each starts again at once)"),
	RPF(fragments, FT_INTEGER, FS_DBL, 1, 1e6, BOTH, 1,
	    "streaming-diloco: the fragments P the model's units (layers; a residual block "
	    "is one) are cut into, unit i in fragment i mod P; at most the model's units "
	    "(1, the default, fits every model: the whole model overlapped and mixed)"),
	RPF(overlap, FT_INTEGER, FS_DBL, 0, 1e6, BOTH, 1,
	    "streaming-diloco: the local steps tau a fragment's exchange overlaps (the "
	    "paper's main runs: 1); below floor(H / fragments)"),
	RPF(mix, FT_NUMBER, FS_DBL, 0, 1, BOTH, 0.5,
	    "streaming-diloco: alpha, the local weights' share when a global fragment is "
	    "taken (0: the global alone, 0.5: the paper's, 1: never communicates)"),
	RPF(sparta_p, FT_NUMBER, FS_DBL, 0, 1, BOTH, 0.005,
	    "sparta: the fraction p of the parameters averaged across the workers after "
	    "each step (a coordinate's chance, drawn from the run's seed and the round: "
	    "the same mask at every worker)"),
	{.key = "adaptive", .type = FT_BOOLEAN, .store = FS_BOOL, .off = RP(adaptive),
	 .doc = "dcasgd: adaptive lambda (DC-ASGD-a)"},
	{.key = "dylu", .type = FT_BOOLEAN, .store = FS_BOOL, .off = RP(dylu),
	 .doc = "async-diloco: Dynamic Local Updates, each worker's H scaled by its "
		"speed against the fastest's"},
	{.key = "inner_reset", .type = FT_BOOLEAN, .store = FS_BOOL, .off = RP(inner_reset),
	 .doc = "diloco, async-diloco: each phase starts the worker's inner optimiser afresh "
		"(the asynchronous local-SGD notebook builds a new AdamW a round; the papers keep it)"},
	{.key = "local_opt", .type = FT_STRING, .store = FS_STR, .off = RP(local_opt),
	 .size = sizeof(((rule_params *)0)->local_opt), .choices = local_opts,
	 .stride = sizeof(char *), .def_str = "sgd",
	 .doc = "odsgd: the worker's local step, sgd or cadcasgd (uses lambda and m)"},
	{.key = "weighting", .type = FT_STRING, .store = FS_STR, .off = RP(weighting),
	 .size = sizeof(((rule_params *)0)->weighting), .choices = weightings,
	 .stride = sizeof(char *), .def_str = "none",
	 .doc = "async-diloco: an arrival's weight by its staleness tau, none or poly "
		"(1 / sqrt(1 + tau))"},
	{.key = "outer_opt", .type = FT_STRING, .store = FS_STR, .off = RP(outer_opt),
	 .size = sizeof(((rule_params *)0)->outer_opt), .choices = outer_opts,
	 .stride = sizeof(char *), .def_str = "nesterov",
	 .doc = "diloco, async-diloco: the outer optimiser, nesterov (the paper's), momentum "
		"(heavy ball: what the asynchronous local-SGD notebook ran) or sgd (no momentum)"},
	{.key = "compress", .type = FT_STRING, .store = FS_STR, .off = RP(compress),
	 .size = sizeof(((rule_params *)0)->compress), .choices = compress_names,
	 .stride = sizeof(char *), .def_str = "none",
	 .doc = "every rule but hogwild and sparta: what a push sends, compressed: none, topk or randk "
		"(compress_ratio of the values), int8 or int4 (block-wise scales); a model "
		"exchange sends its difference from the server's weights"},
	RPF(compress_ratio, FT_NUMBER, FS_DBL, 0, 1, BOTH | FD_MIN_OPEN, 0.01,
	    "topk, randk: the fraction of the values sent, k = ceil(ratio n)"),
	{.key = "ef", .type = FT_BOOLEAN, .store = FS_BOOL, .off = RP(ef),
	 .doc = "error feedback: what compression left out of a push (the residual, "
		"per worker, in checkpoints) is added to the next"},
	RPF(demo_decay, FT_NUMBER, FS_DBL, 0, 1, BOTH | FD_MAX_OPEN, 0.999,
	    "demo: beta, the decay of each worker's decoupled momentum (delta = beta delta "
	    "+ lr g; the reference's compression_decay)"),
	RPF(demo_topk, FT_INTEGER, FS_DBL, 1, DCT_MAX_SIDE * DCT_MAX_SIDE, BOTH, 32,
	    "demo: the DCT coefficients a worker sends per chunk, the largest in magnitude "
	    "(at most the chunk's size; the reference's compression_topk)"),
	RPF(demo_chunk, FT_INTEGER, FS_DBL, 1, DCT_MAX_SIDE, BOTH, 64,
	    "demo: the chunk side aimed at; each dimension's chunk is its largest divisor "
	    "not above it (a matrix's blocks r x c; the reference's compression_chunk)"),
};
const field_table fields_rule_params = {rp_f, NF(rp_f)};

/* the device field's values: "auto", then the backend classes' names
 * (the hidden ones, last in the table, are not listed) */
static const char *
device_choice(int i)
{
	const backend_class *b = i > 0 ? backend_class_at(i - 1) : NULL;
	return i == 0 ? "auto" : b && !b->hidden ? b->name : NULL;
}

/* the hidden classes, accepted but not listed */
static const char *
device_hidden(int i)
{
	for (int k = 0, n = 0; backend_class_at(k); k++)
		if (backend_class_at(k)->hidden && n++ == i)
			return backend_class_at(k)->name;
	return NULL;
}

/* the rule field's values: the rule classes' names */
static const char *
rule_choice(int i)
{
	for (int k = 0; rule_table[k]; k++)
		if (k == i)
			return rule_table[k]->name;
	return NULL;
}

/* ---- stop ----------------------------------------------------------------- */

#define CO(m) offsetof(run_config, m)

static const field_desc stop_f[] = {
	{.key = "epochs", .type = FT_NUMBER, .store = FS_DBL, .off = CO(stop_epochs),
	 .min = 0, .max = 1e9, .flags = BOTH | FD_SPARSE,
	 .doc = "stop after this many epochs (0: no limit)"},
	{.key = "steps", .type = FT_INTEGER, .store = FS_U64, .off = CO(stop_steps),
	 .min = 0, .flags = FD_MIN | FD_SPARSE,
	 .doc = "stop at this version, the number of server updates (0: no limit)"},
	{.key = "seconds", .type = FT_NUMBER, .store = FS_DBL, .off = CO(stop_seconds),
	 .min = 0, .max = 1e9, .flags = BOTH | FD_SPARSE,
	 .doc = "stop after this many run seconds, virtual on the virtual clock (0: no limit)"},
	{.key = "target_acc", .type = FT_NUMBER, .store = FS_DBL, .off = CO(stop_target_acc),
	 .min = 0, .max = 1, .flags = BOTH | FD_SPARSE,
	 .doc = "stop once the test accuracy reaches this (0: no target)"},
};
const field_table fields_stop = {stop_f, NF(stop_f)};

/* ---- workers ------------------------------------------------------------ */

#define WO(m) offsetof(worker_override, m)
#define WC(m) offsetof(run_cmd, m)

#define WORKER_FIELDS                                                          \
	{.key = "delay", .type = FT_OBJECT, .off = WO(delay), .flags = FD_MUTABLE, \
	 .cmd = CMD_DELAY, .cmd_off = WC(delay), .has_off = WO(has_delay),        \
	 .sub = &fields_delay,                                                     \
	 .doc = "this worker's delay (merged onto its current one)"},              \
	{.key = "spb_depth", .type = FT_INTEGER, .store = FS_INT,                  \
	 .off = WO(spb_depth), .min = 0, .max = CFG_SPB_MAX, .flags = BOTH | FD_MUTABLE,    \
	 .cmd = CMD_SPB, .cmd_off = WC(spb_depth), .has_off = WO(has_spb),         \
	 .doc = "partial backprop: the top k parameterised layers only (0: all; at most the model's; on a residual net a block boundary: status model_summary.spb_depths)"}, \
	{.key = "speed", .type = FT_NUMBER, .store = FS_DBL, .off = WO(speed),    \
	 .min = 0, .max = 100, .flags = BOTH | FD_MIN_OPEN | FD_MUTABLE, .def = 1, \
	 .cmd = CMD_SPEED, .cmd_off = WC(speed), .has_off = WO(has_speed),         \
	 .doc = "compute speed factor (< 1: a straggler)"},                        \
	{.key = "step_ms", .type = FT_NUMBER, .store = FS_DBL, .off = WO(step_ms), \
	 .min = 0, .max = 1e7, .flags = BOTH | FD_MUTABLE,                         \
	 .cmd = CMD_STEP_MS, .cmd_off = WC(step_ms), .has_off = WO(has_step_ms),   \
	 .doc = "this worker's compute time a step in ms at speed 1, set directly (0: its FLOPs priced; the wall clock pads a faster step to it)"}, \
	{.key = "paused", .type = FT_BOOLEAN, .store = FS_BOOL, .off = WO(paused), \
	 .flags = FD_MUTABLE, .cmd = CMD_PAUSED, .cmd_off = WC(paused),            \
	 .has_off = WO(has_paused), .doc = "the worker sits out"},                 \
	{.key = "link", .type = FT_OBJECT, .off = WO(link), .flags = FD_MUTABLE,   \
	 .cmd = CMD_LINK, .cmd_off = WC(link), .has_off = WO(has_link),            \
	 .sub = &fields_link,                                                      \
	 .doc = "this worker's link to the server (merged onto its current one)"}

static const field_desc worker_f[] = {WORKER_FIELDS};
const field_table fields_worker = {worker_f, NF(worker_f)};

static const field_desc override_f[] = {
	{.key = "id", .type = FT_INTEGER, .store = FS_INT, .off = WO(id),
	 .min = 0, .max = CFG_MAX_WORKERS - 1, .flags = BOTH | FD_NODEFAULT,
	 .has_off = -1, .doc = "the worker (below workers)"},
	WORKER_FIELDS,
};
const field_table fields_override = {override_f, NF(override_f)};

/* ---- the run object ------------------------------------------------------- */

#define STRF(k, m, dflt, dc)                                                 \
	{.key = #k, .type = FT_STRING, .store = FS_STR, .off = CO(m),           \
	 .size = sizeof(((run_config *)0)->m), .def_str = dflt, .doc = dc}

static const field_desc run_f[] = {
	STRF(model, model, "mlp:784-256-128-10",
	     "logreg, mlp:<in>-<hidden>...-<out>, lenet5, resnet20 or "
	     "resnet:<N> (N = 6n + 2: 8, 14, 20, 32, ...), or a graph {\"nodes\": [...]}"),
	STRF(dataset, dataset, "fashion-mnist",
	     "fashion-mnist, idx:<dir>, cifar10:<dir>, synthetic:<n> or blobs:<centres>,<per>,<dim>,<classes>[,<sigma>]; text for a model with a "
	     "context: text:<file> (plain or gzip), text:webster or synthetic-text:<n>"),
	{.key = "data_split", .type = FT_STRING, .store = FS_STR, .off = CO(data_split),
	 .size = sizeof(((run_config *)0)->data_split), .def_str = "iid", .flags = FD_SPARSE,
	 .doc = "how the training set is split among the workers: iid (every worker draws from "
		"all of it), shards:K (sorted by label, cut into workers x K shards, K dealt to "
		"each), dirichlet:ALPHA (per class, Dirichlet(ALPHA) shares; smaller is more "
		"skewed) or contiguous (worker i the i-th range of indices); seeded, made again "
		"when the worker count changes; fixed for the run"},
	{.key = "augment", .type = FT_STRING, .store = FS_ENUM, .off = CO(augment),
	 .choice_fn = aug_kind_name, .def = AUG_AUTO, .flags = FD_SPARSE,
	 .doc = "the training batches' augmentation: crop-flip (pad 4 pixels of zeros, a random "
		"crop of the image's size, a horizontal flip with probability 1/2; seeded: the "
		"same views for a seed), none, or auto (crop-flip on cifar10:<dir> data, none on "
		"any other); never the test set"},
	{.key = "device", .type = FT_STRING, .store = FS_STR, .off = CO(device),
	 .size = sizeof(((run_config *)0)->device), .choice_fn = device_choice,
	 .hidden_fn = device_hidden, .def_str = "auto", .doc = "where the model trains"},
	{.key = "rule", .type = FT_STRING, .store = FS_STR, .off = CO(rule),
	 .size = sizeof(((run_config *)0)->rule), .choice_fn = rule_choice,
	 .def_str = "asgd", .flags = FD_MUTABLE,
	 .cmd = CMD_RULE, .cmd_off = WC(rule), .doc = "the update rule (see rules)"},
	{.key = "rule_params", .type = FT_OBJECT, .off = CO(rp), .flags = FD_MUTABLE,
	 .cmd = CMD_RULE_PARAMS, .cmd_off = RC, .echo = CMD_RULE | CMD_RULE_PARAMS,
	 .sub = &fields_rule_params,
	 .doc = "the rules' parameters (merged onto the current ones)"},
	{.key = "lr", .type = FT_NUMBER, .store = FS_DBL, .off = CO(lr),
	 .min = 0, .max = 100, .flags = BOTH | FD_MIN_OPEN | FD_MUTABLE, .def = 0.05,
	 .cmd = CMD_LR, .cmd_off = WC(lr), .doc = "learning rate"},
	{.key = "momentum", .type = FT_NUMBER, .store = FS_DBL, .off = CO(momentum),
	 .min = 0, .max = 1, .flags = BOTH | FD_MAX_OPEN | FD_MUTABLE,
	 .cmd = CMD_MOMENTUM, .cmd_off = WC(momentum), .doc = "server momentum"},
	{.key = "weight_decay", .type = FT_NUMBER, .store = FS_DBL,
	 .off = CO(weight_decay), .min = 0, .max = 1,
	 .flags = BOTH | FD_MAX_OPEN | FD_MUTABLE, .cmd = CMD_WEIGHT_DECAY,
	 .cmd_off = WC(weight_decay),
	 .doc = "weight decay at the server: L2 in the gradient (sgd, momentum, nesterov, "
		"adam); adamw: decoupled, of the weights only (not the biases)"},
	{.key = "optimizer", .type = FT_STRING, .store = FS_ENUM, .off = CO(opt.kind),
	 .choices = optimizers, .stride = sizeof(char *), .def = OPT_SGD,
	 .flags = FD_MUTABLE | FD_SPARSE, .cmd = CMD_OPTIMIZER, .cmd_off = WC(optimizer),
	 .doc = "the server's update: sgd (heavy ball when momentum > 0), momentum, "
		"nesterov, adam or adamw (mid-run: a change of family zeroes the state)"},
	{.key = "beta1", .type = FT_NUMBER, .store = FS_DBL, .off = CO(opt.beta1),
	 .min = 0, .max = 1, .flags = BOTH | FD_MAX_OPEN | FD_SPARSE, .def = 0.9,
	 .when_key = "optimizer", .when_mask = (1u << OPT_ADAM) | (1u << OPT_ADAMW),
	 .doc = "adam, adamw: decay of the mean gradient"},
	{.key = "beta2", .type = FT_NUMBER, .store = FS_DBL, .off = CO(opt.beta2),
	 .min = 0, .max = 1, .flags = BOTH | FD_MAX_OPEN | FD_SPARSE, .def = 0.999,
	 .when_key = "optimizer", .when_mask = (1u << OPT_ADAM) | (1u << OPT_ADAMW),
	 .doc = "adam, adamw: decay of the mean squared gradient"},
	{.key = "eps", .type = FT_NUMBER, .store = FS_DBL, .off = CO(opt.eps),
	 .min = 0, .max = 1, .flags = BOTH | FD_MIN_OPEN | FD_SPARSE, .def = 1e-8,
	 .when_key = "optimizer", .when_mask = (1u << OPT_ADAM) | (1u << OPT_ADAMW),
	 .doc = "adam, adamw: added to the root mean square"},
	{.key = "clip", .type = FT_NUMBER, .store = FS_DBL, .off = CO(opt.clip),
	 .min = 0, .max = 1e9, .flags = BOTH | FD_MUTABLE | FD_SPARSE,
	 .cmd = CMD_CLIP, .cmd_off = WC(clip),
	 .doc = "clip each update's gradient to this global norm (0: off)"},
	{.key = "lr_schedule", .type = FT_OBJECT, .off = CO(opt.sched), .flags = FD_SPARSE,
	 .sub = &fields_sched,
	 .doc = "lr over the server's updates: warm-up, then constant, cosine, linear or "
		"step decay; a PATCH of lr moves the whole curve"},
	{.key = "batch", .type = FT_INTEGER, .store = FS_INT, .off = CO(batch),
	 .min = 1, .max = 65536, .flags = BOTH | FD_MUTABLE, .def = 64,
	 .cmd = CMD_BATCH, .cmd_off = WC(batch),
	 .doc = "minibatch per worker step (mid-run: at most the starting batch)"},
	{.key = "workers", .type = FT_INTEGER, .store = FS_INT, .off = CO(workers),
	 .min = 0, .max = CFG_MAX_WORKERS, .flags = BOTH | FD_MUTABLE, .def = 1,
	 .cmd = CMD_WORKERS, .cmd_off = WC(workers),
	 .doc = "number of in-process workers (0: remote workers only, on the wall clock)"},
	{.key = "threads", .type = FT_INTEGER, .store = FS_INT, .off = CO(threads),
	 .min = 0, .max = 64, .flags = BOTH,
	 .doc = "compute threads per worker (0: automatic)"},
	{.key = "delay", .type = FT_OBJECT, .off = CO(delay), .flags = FD_MUTABLE,
	 .cmd = CMD_DELAY, .cmd_off = WC(delay), .sub = &fields_delay,
	 .doc = "every worker's injected delay (mid-run: replaces the overrides' delays)"},
	{.key = "link", .type = FT_OBJECT, .off = CO(link), .flags = FD_MUTABLE | FD_SPARSE,
	 .cmd = CMD_LINK, .cmd_off = WC(link), .sub = &fields_link,
	 .doc = "every worker's link to the server: latency and bandwidth, charged on the "
		"virtual clock for the bytes each step pulls and pushes (mid-run: replaces the "
		"overrides' links)"},
	{.key = "server_ms", .type = FT_NUMBER, .store = FS_DBL, .off = CO(server_ms),
	 .min = 0, .max = 3600e3, .flags = BOTH | FD_MUTABLE | FD_SPARSE,
	 .cmd = CMD_SERVER_MS, .cmd_off = WC(server_ms),
	 .doc = "virtual clock: the server's time to serve one push, a queue of one "
		"(`stalelab bench --profile` measures it; 0: free)"},
	{.key = "worker_overrides", .type = FT_ARRAY, .sub = &fields_override,
	 .doc = "per-worker settings at the start (mid-run: PATCH /api/v1/workers/{id})"},
	{.key = "clock", .type = FT_STRING, .store = FS_STR, .off = CO(clock),
	 .size = sizeof(((run_config *)0)->clock), .choices = clocks,
	 .stride = sizeof(char *), .def_str = "wall",
	 .doc = "wall: threads that really sleep; virtual: a deterministic simulated clock"},
	{.key = "seed", .type = FT_INTEGER, .store = FS_U64, .off = CO(seed),
	 .min = 0, .flags = FD_MIN, .def = 1, .doc = "seed of every random stream"},
	{.key = "stop", .type = FT_OBJECT, .off = 0, .sub = &fields_stop,
	 .doc = "when the run ends (none set: never)"},
	{.key = "eval_every", .type = FT_INTEGER, .store = FS_INT, .off = CO(eval_every),
	 .min = 0, .max = 1e8, .flags = BOTH | FD_MUTABLE, .def = 200,
	 .cmd = CMD_EVAL_EVERY, .cmd_off = WC(eval_every),
	 .doc = "server updates between test-set evaluations (0: at epoch ends only)"},
	{.key = "coherence_every", .type = FT_INTEGER, .store = FS_INT,
	 .off = CO(coherence_every), .min = 0, .max = 1e8, .flags = BOTH | FD_SPARSE,
	 .doc = "virtual clock: every K updates, the cosine between the gradients applied and "
		"fresh ones of the same batches at the weights they meet (0: off)"},
	{.key = "schedule", .type = FT_ARRAY, .flags = FD_NOECHO,
	 .doc = "timed changes: [{\"at\": {\"v\": N} or {\"t\": s}, \"worker\": k?, \"set\": {...}}]"},
};
const field_table fields_run = {run_f, NF(run_f)};

static const field_desc control_f[] = {
	{.key = "paused", .type = FT_BOOLEAN, .store = FS_BOOL, .flags = FD_MUTABLE,
	 .cmd = CMD_PAUSED, .cmd_off = WC(paused), .doc = "pause or resume the run"},
	/* FS_NONE: nothing to store, only true is accepted */
	{.key = "stop", .type = FT_BOOLEAN, .store = FS_NONE, .flags = FD_MUTABLE,
	 .cmd = CMD_STOP, .doc = "true: stop the run now (it ends and is logged)"},
	{.key = "checkpoint", .type = FT_STRING, .store = FS_STR, .flags = FD_MUTABLE | FD_NOECHO,
	 .size = sizeof(((run_cmd *)0)->path), .cmd = CMD_CHECKPOINT, .cmd_off = WC(path),
	 .doc = "write a checkpoint to this file at this point (schedules)"},
};
const field_table fields_controls = {control_f, NF(control_f)};

/* ---- functions -------------------------------------------------------------- */

const char *
fields_cmd_key(unsigned bit)
{
	const field_table *const t[] = {&fields_run, &fields_controls, &fields_worker};
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++)
		for (int i = 0; i < t[k]->n; i++)
			if (t[k]->f[i].cmd == bit)
				return t[k]->f[i].key;
	return NULL;
}

const field_desc *
fields_find(const field_table *t, const char *key)
{
	for (int i = 0; i < t->n; i++)
		if (!strcmp(t->f[i].key, key))
			return &t->f[i];
	return NULL;
}

const char *
field_choice(const field_desc *f, int i)
{
	if (f->choice_fn)
		return i < 0 ? NULL : f->choice_fn(i);
	if (!f->choices || i < 0)
		return NULL;
	/* walk up to i: a value read from a file may be any number */
	const char *c = NULL;
	for (int k = 0; k <= i; k++)
		if (!(c = *(const char *const *)((const char *)f->choices + (size_t)k * f->stride)))
			return NULL;
	return c;
}

int
field_choice_index(const field_desc *f, const char *s)
{
	const char *c;
	for (int i = 0; (c = field_choice(f, i)); i++)
		if (!strcmp(c, s))
			return i;
	for (int i = 0; f->hidden_fn && (c = f->hidden_fn(i)); i++)
		if (!strcmp(c, s))
			return -2 - i;
	return -1;
}

void
field_choices_str(const field_desc *f, char *buf, size_t cap)
{
	size_t n = 0;
	const char *c;
	buf[0] = 0;
	for (int i = 0; (c = field_choice(f, i)) && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", c);
}

void
field_range_str(const field_desc *f, char *buf, size_t cap)
{
	int lo = f->flags & FD_MIN, hi = f->flags & FD_MAX;
	if (lo && hi)
		snprintf(buf, cap, "%c%.10g, %.10g%c", f->flags & FD_MIN_OPEN ? '(' : '[',
			 f->min, f->max, f->flags & FD_MAX_OPEN ? ')' : ']');
	else if (lo)
		snprintf(buf, cap, "%s %.10g", f->flags & FD_MIN_OPEN ? ">" : ">=", f->min);
	else if (hi)
		snprintf(buf, cap, "%s %.10g", f->flags & FD_MAX_OPEN ? "<" : "<=", f->max);
	else
		snprintf(buf, cap, "any");
}

int
field_in_range(const field_desc *f, double d)
{
	if (isnan(d))
		return 0;
	if (f->type == FT_INTEGER && d != floor(d))
		return 0;
	if (f->flags & FD_MIN && (f->flags & FD_MIN_OPEN ? !(d > f->min) : !(d >= f->min)))
		return 0;
	if (f->flags & FD_MAX && (f->flags & FD_MAX_OPEN ? !(d < f->max) : !(d <= f->max)))
		return 0;
	return isfinite(d);
}

int
field_range_fail(const field_desc *f, const char *path, double got, char *err)
{
	char r[96];
	field_range_str(f, r, sizeof(r));
	return sl_fail(err, SL_EINVAL, "%s: must be %s%s%s, got %.10g", path,
		       f->type == FT_INTEGER ? "an integer " : "",
		       (f->flags & BOTH) == BOTH ? "in " : "", r, got);
}

double
field_get(const field_desc *f, const void *base)
{
	const char *p = (const char *)base + f->off;
	double d = 0;
	switch (f->store) {
	case FS_DBL: memcpy(&d, p, sizeof(d)); return d;
	case FS_INT: case FS_BOOL: case FS_ENUM: {
		int i;
		memcpy(&i, p, sizeof(i));
		return i;
	}
	case FS_U64: {
		uint64_t u;
		memcpy(&u, p, sizeof(u));
		return (double)u;
	}
	default: return 0;
	}
}

void
field_set(const field_desc *f, void *base, double d)
{
	char *p = (char *)base + f->off;
	switch (f->store) {
	case FS_DBL: memcpy(p, &d, sizeof(d)); break;
	case FS_INT: case FS_BOOL: case FS_ENUM: {
		int i = (int)d;
		memcpy(p, &i, sizeof(i));
		break;
	}
	case FS_U64: {
		uint64_t u = (uint64_t)d;
		memcpy(p, &u, sizeof(u));
		break;
	}
	default: break;
	}
}

int
field_applies(const field_desc *f, const field_table *t, const void *base)
{
	if (!f->when_key)
		return 1;
	const field_desc *k = fields_find(t, f->when_key);
	int v = k ? (int)field_get(k, base) : -1;
	return v >= 0 && v < 32 && (f->when_mask >> v & 1u);
}

void
fields_defaults(const field_table *t, void *base)
{
	for (int i = 0; i < t->n; i++) {
		const field_desc *f = &t->f[i];
		if (f->type == FT_OBJECT && f->sub)
			fields_defaults(f->sub, (char *)base + f->off);
		else if (f->store == FS_STR)
			snprintf((char *)base + f->off, f->size, "%s", f->def_str ? f->def_str : "");
		else if (f->store != FS_NONE)
			field_set(f, base, f->def);
	}
}

static int
check_one(const field_desc *f, const field_table *t, const void *base,
	  const char *path, char *err)
{
	char p[128];
	snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", f->key);
	if (!field_applies(f, t, base))
		return 0;
	switch (f->store) {
	case FS_STR: {
		const char *s = (const char *)base + f->off;
		if (field_choice(f, 0) && field_choice_index(f, s) == -1)
			return config_choice_fail(f, p, s, err);
		if (!*s)
			return sl_fail(err, SL_EINVAL, "%s: must not be empty", p);
		return 0;
	}
	case FS_DBL: case FS_INT: case FS_U64: {
		double d = field_get(f, base);
		return field_in_range(f, d) ? 0 : field_range_fail(f, p, d, err);
	}
	case FS_ENUM: {
		int i = (int)field_get(f, base);
		if (!field_choice(f, i))
			return sl_fail(err, SL_EINVAL, "%s: unknown value %d", p, i);
		return 0;
	}
	case FS_BOOL:
	case FS_NONE:
		if (f->type == FT_OBJECT && f->sub)
			return fields_validate(f->sub, (const char *)base + f->off, p, err);
		return 0;
	}
	return 0;
}

int
fields_validate(const field_table *t, const void *base, const char *path,
		char *err)
{
	for (int i = 0; i < t->n; i++) {
		const field_desc *f = &t->f[i];
		if (f->has_off > 0 && !*(const int *)((const char *)base + f->has_off))
			continue;
		int rc = check_one(f, t, base, path, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* the mutable fields of t that c sets, checked where they sit in c */
static int
check_cmd_table(const field_table *t, const run_cmd *c, char *err)
{
	for (int i = 0; i < t->n; i++) {
		const field_desc *f = &t->f[i];
		if (!(f->flags & FD_MUTABLE) || !(c->fields & f->cmd) || f->cmd == CMD_CHECKPOINT)
			continue;
		field_desc g = *f;
		g.off = f->cmd_off; /* the same field, at its place in run_cmd */
		g.has_off = -1;
		int rc = check_one(&g, t, c, "", err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int
fields_check_cmd(const run_cmd *c, char *err)
{
	if (c->worker >= CFG_MAX_WORKERS)
		return sl_fail(err, SL_EINVAL, "worker: must be in [0, %d], got %d",
			       CFG_MAX_WORKERS - 1, c->worker);
	return check_cmd_table(c->worker >= 0 ? &fields_worker : &fields_run, c, err);
}

int
fields_model_layers(const char *spec)
{
	return model_spec_param_layers(spec);
}

int
fields_model_cuts(const char *spec, int *depths, int max)
{
	return model_spec_cut_depths(spec, depths, max);
}
