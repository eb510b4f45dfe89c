/* ps_config.h - what configures the parameter server and its rules, as
 * plain data (no JSON, no run): the rules' parameters, whose keys each
 * rule class names (rule.h), and the bound on worker ids. The run object
 * (engine/run/config.h) holds a rule_params; engine/run/fields.c
 * describes its keys. */
#ifndef SL_PS_CONFIG_H
#define SL_PS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* the most workers a run has and a server takes: ids are below it */
#define PS_MAX_WORKERS 256

typedef struct rule_params {
	double s, lambda, H, n, local_lr, m, beta, period, warmup;
	double outer_lr, outer_momentum; /* diloco: the server's Nesterov step */
	double dn_period; /* async-diloco: Delayed Nesterov's N (1: every arrival) */
	double grace_ms;  /* async-diloco: the grace window (0: none) */
	double sparta_p;  /* sparta: the fraction of the coordinates averaged a step */
	int adaptive;     /* dcasgd: adaptive lambda (DC-ASGD-a) */
	int dylu;         /* async-diloco: Dynamic Local Updates */
	int inner_reset;  /* diloco, async-diloco: a fresh inner optimiser each phase */
	char local_opt[16];
	char weighting[16]; /* async-diloco: "none", or "poly": 1 / sqrt(1 + tau) */
	char outer_opt[16]; /* diloco, async-diloco: "nesterov" ("" too), "momentum"
			     * (heavy ball) or "sgd" */
	/* every rule but hogwild: what a push sends, compressed (compress.h;
	 * docs/rules.md, "Compression") */
	char compress[8];      /* "none", "topk", "randk", "int8", "int4" */
	double compress_ratio; /* topk, randk: the fraction of values kept */
	int ef;                /* error feedback: the residual added to the next push */
	/* streaming-diloco: the model's units cut into `fragments` strided
	 * fragments, each exchanged while `overlap` more local steps are
	 * computed, the global fragment taken back mixed with the local one
	 * by `mix` (0: the global alone) */
	double fragments, overlap, mix;
	/* demo (DeMo, Peng et al. 2024): the decay beta of each worker's
	 * decoupled momentum, the DCT coefficients kept per chunk, and the
	 * chunk side aimed at (a dimension's largest divisor not above it) */
	double demo_decay, demo_topk, demo_chunk;
} rule_params;

/* A parameterised layer's slice of the flat buffer. */
typedef struct ps_layer {
	size_t off, len;
	size_t wlen; /* its first wlen floats are what adamw decays (a
		      * matrix's, kernel's or table's weights), the rest
		      * biases or a norm's gains */
	/* its tensors' shapes, as demo chunks them: the first rows x cols
	 * floats a row-major matrix (rows 0: none), the rest vectors of
	 * vlen floats each (vlen 0: the rest is one vector) */
	size_t rows, cols, vlen;
} ps_layer;

/* The optimiser of every update the server applies (docs/rules.md,
 * "Optimisers"): its kind, Adam's constants, clipping and the schedule.
 * The learning rate, momentum and weight decay are the run object's own
 * fields. */
typedef enum opt_kind {
	OPT_SGD,      /* w -= lr (g + wd w); heavy ball when momentum > 0 */
	OPT_MOMENTUM, /* heavy ball: m = mu m + g + wd w; w -= lr m */
	OPT_NESTEROV, /* m = mu m + g'; w -= lr (g' + mu m), g' = g + wd w */
	OPT_ADAM,     /* Kingma & Ba; weight decay as L2 in the gradient */
	OPT_ADAMW,    /* Loshchilov & Hutter: decay decoupled, weights only */
	OPT_N
} opt_kind;

/* A learning-rate schedule over the server's updates (its version): a
 * linear warm-up from lr/(warmup+1) to lr, then a decay to floor x lr. */
typedef enum sched_kind {
	SCHED_CONSTANT, /* lr after the warm-up */
	SCHED_COSINE,   /* half a cosine from lr to floor x lr at decay_updates */
	SCHED_LINEAR,   /* a straight line to floor x lr at decay_updates */
	SCHED_STEP,     /* x gamma every step_every updates, down to floor x lr */
	SCHED_N
} sched_kind;

typedef struct lr_sched {
	int kind;               /* sched_kind */
	double warmup;          /* updates */
	double decay_updates;   /* cosine, linear: the update the floor is reached at */
	double floor;           /* the lowest lr, a fraction of lr */
	double step_every;      /* step: updates between two cuts */
	double gamma;           /* step: the factor of a cut */
} lr_sched;

typedef struct opt_cfg {
	int kind;               /* opt_kind */
	double beta1, beta2, eps;
	double clip;            /* each update's gradient to this global norm
				 * at most (0: no clipping) */
	lr_sched sched;
} opt_cfg;

/* The factor of lr at update v (the server's version) under s: in
 * (0, 1], 1 without a schedule. */
double lr_sched_factor(const lr_sched *s, uint64_t v);

#endif
