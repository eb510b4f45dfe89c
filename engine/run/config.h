/* config.h - the run object of DESIGN.md as a C struct: defaults and
 * range validation. JSON parsing lives in daemon/config.c; this header is
 * plain data so the engine never sees JSON. */
#ifndef SL_CONFIG_H
#define SL_CONFIG_H

#include <stdint.h>

#include "ps_config.h"
#include "sl.h"

#define CFG_MAX_OVERRIDES 256
#define CFG_MAX_WORKERS PS_MAX_WORKERS
/* the deepest spb_depth a run takes (a remote worker's push names its
 * layers in a table of WIRE_LAYERS_MAX) */
#define CFG_SPB_MAX 64

typedef enum delay_dist {
	DELAY_NONE,
	DELAY_CONST,
	DELAY_UNIFORM,
	DELAY_EXP,
	DELAY_LOGNORMAL,
	DELAY_PARETO,
	DELAY_VERSION, /* staleness drawn from U{0..s} */
} delay_dist;

typedef struct delay_cfg {
	delay_dist dist;
	double mean_ms;
	double sigma;     /* lognormal shape */
	double alpha;     /* pareto shape */
	double spread;    /* uniform: half-width as a fraction of the mean */
	int s;            /* version: max staleness */
	int at_server;    /* "where": "server" */
	double bandwidth_mbps; /* 0: infinite */
} delay_cfg;

/* a worker's link to the server (the virtual clock charges it for the
 * bytes each step pulls and pushes; the wall clock sleeps it) */
typedef struct link_cfg {
	double latency_ms;     /* one way */
	double bandwidth_mbps; /* 0: infinite */
} link_cfg;

typedef struct worker_override {
	int id;
	int has_delay, has_spb, has_speed, has_paused, has_link, has_step_ms;
	delay_cfg delay;
	link_cfg link;
	int spb_depth;
	double speed;
	double step_ms;
	int paused;
} worker_override;

typedef struct run_config {
	char model[4096]; /* a spec, or a graph's (engine/nn/graph_spec.h) */
	char dataset[256];
	char data_split[32]; /* iid, shards:K, dirichlet:ALPHA, contiguous (split.h) */
	int augment;      /* aug_kind (engine/data/augment.h): auto, none, crop-flip */
	char device[8];   /* auto | cpu | cuda */
	char rule[32];
	rule_params rp;    /* the rule's parameters (engine/ps/ps_config.h) */
	double lr, momentum, weight_decay;
	opt_cfg opt;       /* optimiser, beta1/beta2/eps, clip, lr_schedule */
	int batch;
	int workers;
	int threads;      /* compute threads per worker (0 = auto) */
	delay_cfg delay;
	link_cfg link;    /* every worker's link (overrides: its own) */
	double server_ms; /* virtual clock: the server's time per push it serves */
	int n_overrides;
	worker_override overrides[CFG_MAX_OVERRIDES];
	char clock[8];    /* wall | virtual */
	uint64_t seed;
	double stop_epochs;
	uint64_t stop_steps;
	double stop_seconds;
	double stop_target_acc;
	int eval_every;
	int coherence_every; /* virtual clock: gradient coherence every K updates (0: off) */
	int n_schedule;   /* schedule entries (kept as JSON by the daemon) */
} run_config;

/* Defaults of a headless run: fashion-mnist MLP, one worker, asgd (with
 * one worker and no delay this is sequential SGD), lr 0.05, batch 64. */
void config_defaults(run_config *c);

/* Range and consistency checks; err names the field. A run's own state
 * passes too: an override may outlive its worker when the run shrinks
 * (config_overrides_fit refuses that in a run object a person wrote). */
int config_validate(const run_config *c, char *err);

/* The optimiser fits the rule and the momentum (checked once the run
 * object is whole, by run_new, and for each change, so the fields may come
 * in any order): momentum and nesterov
 * need momentum > 0; hogwild, whose threads step the shared weights
 * without a lock, takes sgd without clipping; a cosine or linear
 * decay ends after its warm-up. 0, or -SL_EINVAL naming the field. */
/* compress other than none where the rule pushes nothing (hogwild) or
 * sends a message of its own (demo): -SL_EINVAL naming
 * rule_params.compress */
int config_compress_fits(const char *rule, const rule_params *rp, char *err);
int config_optim_fits(const char *rule, const opt_cfg *o, double momentum, char *err);
/* streaming-diloco's fragments and overlap: fragments at most the model's
 * units (units < 0: not known, not checked) and at most H, overlap below
 * floor(H / fragments). 0, or -SL_EINVAL with err naming the field. */
int config_fragments_fit(const char *rule, const rule_params *rp, int units, char *err);

/* Every worker_overrides entry names a worker of the run (id < workers). */
int config_overrides_fit(const run_config *c, char *err);

/* The values spb_depth takes on model spec `spec` into depths[0..max)
 * (at most CFG_SPB_MAX + 1 of them): 0 (full backprop), then the model's
 * cut depths (model.h) up to CFG_SPB_MAX: every depth of a sequential
 * model, the block boundaries of a residual one. Their count; -1 when
 * model_new does not take the spec. */
int config_spb_depths(const char *spec, int *depths, int max);

/* spb_depth `depth` (the field at `path`, e.g. "worker_overrides[2].
 * spb_depth") on model spec `spec`: 0, or -SL_EINVAL with err naming the
 * field, the model and what it takes, when the depth is past the model's
 * parameterised layers or ends inside a block (docs/rules.md, "Structured
 * partial backpropagation"). A spec model_new does not take passes: the
 * model's own error comes first. */
int config_spb_fits(const char *path, int depth, const char *spec, char *err);
/* The same for a depth within the model's layers: only the block check
 * (a caller with its own range message). */
int config_spb_at_boundary(const char *path, int depth, const char *spec, char *err);

const char *delay_dist_name(delay_dist d);

/* 1 if name is one of the update rules. */
int config_rule_known(const char *name);

struct field_desc;
/* The value s is none of the choices of field f (fields.h): "PATH:
 * unknown \"S\" (expected A, B, C)", with "; did you mean 'B'?" before
 * the parenthesis closes when a choice is near (suggest.h); returns
 * -SL_EINVAL. */
int config_choice_fail(const struct field_desc *f, const char *path, const char *s, char *err);

#endif
