/* rules.h - the rule classes (engine/ps/rules/), for the table and tests.
 * Each rule's own file says what it does and where it comes from. */
#ifndef SL_RULES_H
#define SL_RULES_H

#include "rule.h"

extern const rule_class rule_ssgd, rule_asgd, rule_softsync, rule_ssp,
	rule_sasgd, rule_dcasgd, rule_odsgd, rule_localsgd, rule_easgd,
	rule_hogwild, rule_diloco, rule_async_diloco, rule_async_gated;
extern const rule_class rule_streaming_diloco;
extern const rule_class rule_sparta;
extern const rule_class rule_demo;

/* sparta's mask of round `round` (the server's version when the round
 * began) under the run's seed: each of the n coordinates in it with
 * probability p, 1 in mask[i] (n bytes; NULL: counted only); returns
 * |M|, the coordinates in it. Every worker draws the same. */
size_t rule_sparta_mask(uint64_t seed, uint64_t round, double p, size_t n,
			unsigned char *mask);

/* The server side every round-based rule shares: add the gradient to the
 * round, apply the average when it is complete. */
int rule_server_round(struct ps *p, const struct ps_grad *g, int round_size,
		      struct ps_result *res);

/* What the rules that train local weights share (local.c). */

/* The pull of the rules that train local weights and exchange models
 * (localsgd, easgd): the worker's own weights, the server's at first;
 * staleness counts local steps, so v_read is the current version. */
void rule_pull_model(rule_run *e, rule_worker *w);
/* Local weights, taken from the server on the first step (or the first
 * after a rule switch); w->v_read is left to the caller. */
void rule_pull_local(rule_run *e, rule_worker *w);
/* One plain SGD step on the worker's own weights from w->grad_off. */
void rule_local_sgd(const rule_run *e, rule_worker *w, const float *g, float lr);
/* One local step of localsgd and easgd: the run's optimiser on the
 * worker's own weights from w->grad_off, with the worker's own state
 * (w->opt, made on the first step); sgd is the plain step (momentum and
 * weight decay are the server's), as before optimisers existed. 0, or -1
 * when its state cannot be allocated (the run fails). */
int rule_local_step(rule_run *e, rule_worker *w, const float *g);
/* inner_reset: the worker's inner optimiser starts afresh (and so does a
 * remote worker's, told with its next step) */
void rule_inner_reset(rule_worker *w);
/* localsgd's and diloco's: a local step, and after H of them the model
 * sent to the server's round (rule_params H); the staleness recorded */
uint64_t rule_local_deliver_model(rule_run *e, rule_worker *w);
/* The worker's weights to the server's round of models (a PS_MODEL
 * message of every running worker's; the caller has set w->waiting): the
 * round's mean becomes the server's weights when it is complete. */
void rule_local_send_model(rule_run *e, rule_worker *w);
/* Does the step being begun complete H local steps (and send)? */
int rule_local_exchanges(const rule_run *e, const rule_worker *w);
/* localsgd's and diloco's phase: rule_params H */
int rule_local_phase_h(const rule_run *e, const rule_worker *w);

/* DeMo's arithmetic (demo.c), on host floats, for its hooks and tests. */

/* A worker's step on the layers from float off on: delta = beta delta +
 * lr g (rule_params demo_decay); per chunk of each tensor, the demo_topk
 * coefficients of DCT(delta) with the largest magnitudes into coef (the
 * rest 0) and kept (1 where kept, else 0); delta -= IDCT(coef). coef and
 * kept are n floats, written from off on. 0, or -1 when out of memory. */
int demo_encode(const ps_layer *layers, int n_layers, size_t off, const rule_params *rp,
		float lr, const float *g, float *delta, float *coef, float *kept);
/* The server's step on each layer with layer_count > 0: the mean of each
 * coefficient over its senders (sum / senders where senders > 0, else 0;
 * senders NULL: the layer's count), Q = its IDCT per chunk, w = w (1 - lr
 * wd) - lr sign(Q) (the decay multiplied in only when wd is not 0, as
 * the reference does). 0, or -1 when out of memory. */
int demo_apply(const ps_layer *layers, int n_layers, const int *layer_count,
	       const rule_params *rp, float lr, float wd, const float *sum, const float *senders,
	       float *w);
/* What a push of the layers from float off on sends: 12 bytes (an int64
 * index, an fp32 value) for each coefficient kept, min(demo_topk, the
 * chunk's size) a chunk (rule_class.push_bytes). */
double demo_push_bytes(const ps_layer *layers, int n_layers, size_t off, const rule_params *rp);

#endif
