/* model.h - models built from a spec string or a list of node
 * descriptions: nodes in topological order (op.h), each an op of the table
 * in engine/nn/ops/ reading earlier nodes' outputs, over one flat
 * parameter buffer and one flat gradient buffer.
 *
 * Parameters are laid out node by node, input side first (weights, then
 * bias), so the top k parameterised nodes ("layers") form one contiguous
 * tail: the parameter server can send, average and version the model as one
 * block and structured partial backprop can address a suffix. The forward
 * runs the nodes in order, the backward in reverse, summing a node's
 * gradient over the nodes that read it. Specs (sequential):
 *   "logreg"                 dense in -> classes
 *   "mlp:784-256-128-10"     dense layers with relu between (any sizes)
 *   "lenet5"                 conv 5x5x6 pad 2, relu, maxpool 2, conv 5x5x16,
 *                            relu, maxpool 2, fc 400-120-84-10, relu between
 *   "resnet20", "resnet:N"   the CIFAR ResNet of He et al. 2016 (section
 *                            4.2), N = 6n + 2 (8, 14, 20, 32, 44, 56, ...):
 *                            conv 3x3x16, bn, relu; 3 stages of n basic
 *                            blocks (conv 3x3, bn, relu, conv 3x3, bn, the
 *                            option-A shortcut added, relu) with 16, 32, 64
 *                            channels, stride 2 at the first block of stages
 *                            2 and 3; global average pooling; dense to the
 *                            classes. Convs have no bias (the bn's beta is
 *                            one) and Kaiming-normal init (fan_in, sd
 *                            sqrt(2 / (cin k k)), as torch's kaiming_normal_
 *                            default); the head Xavier as the other specs'.
 *                            Any input size (32x32 -> 16 -> 8, 28 -> 14 -> 7).
 *                            resnet20 on 32x32x3, 10 classes: 269,722
 *                            parameters, 1,376 floats of state.
 *   "gpt:L4-H4-E128-T64"     nanoGPT's GPT on T token ids a sample (a text
 *                            set; vocabulary = the classes): token and
 *                            learned position embeddings; L pre-norm blocks
 *                            (layernorm, one fused QKV linear, causal
 *                            attention of H heads, a linear, the residual
 *                            add; layernorm, linear 4E, GELU (tanh form),
 *                            linear E, the residual add); a final layernorm;
 *                            the head tied to the token table. Init normal
 *                            sd 0.02, residual projections 0.02 / sqrt(2 L),
 *                            biases 0, layer norms 1 and 0. T targets per
 *                            sample (model.targets), the loss per position.
 * A relu that follows a dense or conv layer is fused into it (for a resnet:
 * into the bn, or the shortcut node that ends a block).
 *
 * Partial backprop depth counts parameterised nodes from the top: for a
 * resnet a conv and a bn are one "layer" each (resnet20: 19 conv, 19 bn and
 * the dense, 39); depth k backprops into the top k of them only (the
 * shortcut hands nothing to a block input below the stop), bit for bit as
 * the full backward computes them, at any depth. The depths that end at a
 * block boundary are the model's cut depths (model_cut_depths); a run
 * takes only those as spb_depth (docs/rules.md).
 *
 * State: what is not trained (batch norm's running statistics) is one flat
 * buffer of n_state floats (backend memory), node by node. A forward runs
 * in training mode (batch statistics; the running ones updated, momentum
 * 0.1) or evaluation mode (the running statistics): model_step trains,
 * model_forward and model_evaluate evaluate. Models without state (every
 * spec but resnet) compute the same either way. */
#ifndef SL_MODEL_H
#define SL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "op.h"
#include "rng.h"
#include "sl.h"

#define MODEL_MAX_NODES 512 /* resnet:N: 15 (N - 2) / 6 + 4 nodes */

/* Static description of one node (what the cluster simulator and the
 * virtual clock need), as reported by model_node_info. */
typedef struct node_info {
	const char *name;        /* its op's */
	int param_index;         /* -1 if no parameters, else 0-based index */
	size_t n_params, p_off;
	size_t n_weights;        /* the first of n_params: weights (the rest bias) */
	size_t n_decay;          /* of those, what adamw decays: n_weights, or 0
				  * for a norm's gains */
	size_t w_cols;           /* the weights as a row-major matrix of w_cols
				  * columns; 0: a vector (op.h's node) */
	size_t act_floats;       /* output activation floats per sample */
	double flops_fwd, flops_bwd_w, flops_bwd_x; /* per sample */
} node_info;

typedef struct model {
	char spec[4096];
	int n_nodes;
	node nodes[MODEL_MAX_NODES];
	int n_param_layers; /* nodes with parameters */
	shape input;
	int in_dim, classes;
	/* labels per sample: 1 (a class per image), or T for a language
	 * model, whose output is a row of class scores per position
	 * ({classes, T, 1}); the loss and accuracy are then per position
	 * (the mean over the batch's B T), and a dataset's y holds T labels
	 * per sample (dataset.h's ylen) */
	int targets;
	size_t n_params;
	size_t n_state;   /* untrained state floats of all nodes */
	size_t mem_bytes; /* backend memory its buffers hold */
	int batch_cap;
	backend *be;
	float *params;      /* own copy (backend memory); may be repointed */
	float *grads;       /* backend memory */
	float *state;       /* n_state floats, backend memory (NULL if none) */
	/* act[0] = input batch, act[i + 1] = node i's output; dact their
	 * gradients */
	float *act[MODEL_MAX_NODES + 1];
	float *dact[MODEL_MAX_NODES + 1];
	/* where a node's input gradient goes before it is added to the sum of
	 * an output read twice or more (NULL when no output is) */
	float *dsum[OP_MAX_IN];
	uint8_t *labels;    /* batch labels (host) */
	/* Optional per-node timing (seconds, accumulated) for benchmarks:
	 * set profile = 1; forward/backward time of node i lands in
	 * prof_fwd[i] / prof_bwd[i]; prof_loss gets the loss layer. */
	int profile;
	double prof_fwd[MODEL_MAX_NODES], prof_bwd[MODEL_MAX_NODES];
	double prof_loss;
} model;

/* Build a model for inputs of shape (c, h, w) and `classes` outputs, with
 * buffers for batches up to batch_cap. Parameters are initialised from
 * (seed, stream 0). On error *out is NULL and err names the problem. */
int model_new(const char *spec, int c, int h, int w, int classes,
	      int batch_cap, uint64_t seed, backend *be, model **out,
	      char *err);
/* Build from node descriptions (op.h), in topological order: node i reads
 * earlier nodes or the input (-1); every node's output but the last's is
 * read. The last node's output is the logits. A relu is fused only where
 * a description says so (relu = 1). On error *out is NULL and err names the
 * problem (and the node, by index). */
int model_new_nodes(const node_desc *desc, int n, shape input, int classes,
		    int batch_cap, uint64_t seed, backend *be, model **out,
		    char *err);
void model_free(model *m);
/* A language model's next token after ids[0..n) (n >= 1; ids in [0,
 * classes)): a forward of the last T of them (T = the model's context)
 * with m->params, the logits at the last position divided by temp (> 0),
 * a softmax, one draw from g. Replaces m's loaded batch. -1 when out of
 * memory. (model_sample.c) */
int model_sample_next(model *m, const int *ids, size_t n, double temp, rng *g);

/* Can m run on d (its "train" or "test" set, what)? d's samples must
 * carry the labels m predicts (m->targets per sample against ds_ylen(d),
 * 0 counting as 1), and a model that starts with an embedding needs token
 * ids in its input (integers in [0, vocab)). 0, or -SL_EINVAL with err
 * naming the set and what is wrong. One pass over d->x for an embedding. */
struct dataset;
int model_check_data(const model *m, const struct dataset *d, const char *what,
		     char *err);

/* The context length T a model spec reads a sample as (gpt:...-T<T>), 0
 * for a model of images (or a graph: its input is the data's), -1 when
 * the spec is a gpt one that does not parse. */
int model_spec_context(const char *spec);

/* Load the data set spec for a run of model_spec: ds_load_ctx with the
 * model's context, so a text set is cut into the model's T; a text set
 * for a model with no context is refused naming both fields. */
struct dataset_pair;
int model_data_load(const char *model_spec, const char *data_spec, uint64_t seed,
		    struct dataset_pair *out, char *err);

/* Parameterised layers of a model spec without building it (the deepest
 * useful spb_depth), or -1 when the spec is not one model_new takes. */
int model_spec_param_layers(const char *spec);

/* Cut depths: the depths d (1 .. n_param_layers - 1) at which the top d
 * parameterised layers begin at a block boundary, a node boundary that
 * exactly one tensor crosses (every edge from below it to above it leaves
 * from the same node's output), somewhere between the d-th parameterised
 * node from the top and the one below it. Sequential models (logreg,
 * mlp, lenet5): every depth. resnet:N: the head (1), each block from its
 * first conv (1 + 4 b), and the stem's bn (its conv's output alone
 * crosses); a depth inside a block is none (the block's input crosses
 * beside the branch). Full backprop (0, or n_param_layers) is not listed.
 * Ascending into depths[0..max); returns how many there are (more than
 * max when they do not fit). */
int model_cut_depths(const model *m, int *depths, int max);
/* The same from a spec without building it; -1 when the spec is not one
 * model_new takes. */
int model_spec_cut_depths(const char *spec, int *depths, int max);
/* depths[0..n) as "1, 5, 9, 13" into buf (cap bytes); when that does not
 * fit, runs of five or more at one step shortened ("1, 5, ..., 37, 38"),
 * then cut short. Returns buf. */
const char *model_depths_str(const int *depths, int n, char *buf, size_t cap);
/* The named models, for front ends (GET /api/v1/schema's model "specs"):
 * spec as written ("lenet5"), or, with arg set, a form whose "<arg>" is an
 * integer in [min, max] at min + k step ("resnet:<N>"). The last has a
 * NULL spec. Every row is a spec model_new takes (tests/test_model.c). */
typedef struct model_builtin {
	const char *spec;
	const char *arg;
	int min, max, step;
	const char *doc;
} model_builtin;

extern const model_builtin model_builtins[];

/* (Re)initialise parameters from the seed (He/Xavier, zero biases). */
void model_init_params(model *m, uint64_t seed);

/* Copy a batch into the input buffer: x is sample-major host data (dim
 * floats each) gathered by idx; converted to the model's input layout. */
void model_load_batch(model *m, const float *x, const uint8_t *y,
		      const uint32_t *idx, int batch);

/* Forward on the loaded batch with parameters `params` (m->params if NULL),
 * in evaluation mode (the running statistics; m->state unchanged).
 * Returns mean loss; *correct gets the hit count if non-NULL. */
double model_forward(model *m, const float *params, int batch, int *correct);
/* The same in the mode given: training 1 normalises with the batch's
 * statistics and moves the running ones in m->state (momentum 0.1), as
 * model_step's forward; 0 is model_forward. */
double model_forward_mode(model *m, const float *params, int batch,
			  int *correct, int training);

/* Floats of untrained state (m->state, backend memory): 0 for a model
 * without batch norm. What a checkpoint saves and a hash covers. */
size_t model_state_floats(const model *m);
/* Running statistics back to their start (means 0, variances 1). */
void model_reset_state(model *m);
/* Recompute the running statistics at `params` (m->params if NULL), as
 * torch.optim.swa_utils.update_bn: reset them, then run training-mode
 * forwards (no backward) on the first nbatches batches of d in order
 * (batches of m->batch_cap samples from sample 0, fewer if d ends first;
 * the last may be short), each with momentum 1 / (k + 1) for the k-th
 * batch from 0, so each running statistic ends as the plain average of
 * the batches' (the mean of batch means, the mean of unbiased batch
 * variances). Deterministic for a backend. Leaves m's loaded batch
 * replaced. No-op for a model without state. */
struct dataset;
void model_recompute_state(model *m, const float *params,
			   const struct dataset *d, int nbatches);

/* Forward (training mode) + backward. Gradients (mean over the batch) of the top `depth`
 * parameterised layers are written to m->grads (depth <= 0 or >=
 * n_param_layers: all). Returns the mean loss. */
double model_step(model *m, const float *params, int batch, int depth);

/* Offset of the gradient tail covering the top `depth` parameterised
 * layers (0 for all). */
size_t model_tail_offset(const model *m, int depth);

/* FLOPs per sample of one step with backprop depth `depth` (all if <= 0):
 * the forward and the backward; model_bwd_flops the backward alone. */
double model_step_flops(const model *m, int depth);
double model_bwd_flops(const model *m, int depth);

/* Fill info[0..n_nodes) (n_nodes returned; at most max). */
int model_node_info(const model *m, node_info *info, int max);

/* Evaluate on a whole set in batches of m->batch_cap (evaluation mode):
 * mean loss and accuracy. */
void model_evaluate(model *m, const float *params, const struct dataset *d,
		    double *loss, double *acc);
/* The same, calling between(ud) between two batches (a caller's chance
 * to do other work while a long evaluation goes on); between may be NULL. */
void model_evaluate_with(model *m, const float *params, const struct dataset *d,
			 double *loss, double *acc, void (*between)(void *), void *ud);

#endif
