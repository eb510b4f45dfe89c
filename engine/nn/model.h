/* model.h - models built from a spec string, as a list of small layer
 * vtables over one flat parameter buffer and one flat gradient buffer.
 *
 * Parameters are laid out layer by layer, input side first (weights, then
 * bias), so the top k parameterised layers form one contiguous tail: the
 * parameter server can send, average and version the model as one block and
 * structured partial backprop can address a suffix. Specs:
 *   "logreg"                 dense in -> classes
 *   "mlp:784-256-128-10"     dense layers with relu between (any sizes)
 *   "lenet5"                 conv 5x5x6 pad 2, relu, maxpool 2, conv 5x5x16,
 *                            relu, maxpool 2, fc 400-120-84-10, relu between
 * A relu that follows a dense or conv layer is fused into it. */
#ifndef SL_MODEL_H
#define SL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "rng.h"
#include "sl.h"

#define MODEL_MAX_LAYERS 32

typedef enum layer_kind {
	LAYER_DENSE,
	LAYER_CONV,
	LAYER_MAXPOOL,
	LAYER_RELU,
	LAYER_FLATTEN, /* [C][H][W][B] -> [B][C*H*W] */
} layer_kind;

/* Per-sample shape; cb = 1 when the activation is a feature map stored
 * [C][H][W][B] (the batch innermost), 0 when it is [B][C*H*W]. */
typedef struct shape {
	int c, h, w;
	int cb;
} shape;

typedef struct layer layer;

typedef struct layer_ops {
	const char *name;
	/* Compute l->out and parameter counts from l->in; 0 or -SL_EINVAL. */
	int (*setup)(layer *l, char *err);
	void (*init)(layer *l, float *params, rng *r);
	void (*forward)(layer *l, backend *be, const float *params,
			const float *x, float *y, int batch);
	/* dy may be modified (relu mask). dx NULL when not needed. Writes this
	 * layer's gradient slice in grads. */
	void (*backward)(layer *l, backend *be, const float *params,
			 const float *x, const float *y, float *dy, float *dx,
			 float *grads, int batch);
} layer_ops;

struct layer {
	const layer_ops *ops;
	layer_kind kind;
	shape in, out;
	int units;               /* dense: outputs; conv: output channels */
	int k, stride, pad;      /* conv / pool */
	int relu;                /* fused relu on the output */
	int he_init;             /* He (relu follows) or Xavier init */
	conv_geom geom;
	size_t n_params, n_weights; /* weights then bias */
	size_t p_off;            /* offset in the flat buffers */
	int32_t *arg;            /* maxpool argmax, batch_cap * out size */
	/* Cost per sample, for accounting and the virtual clock. */
	double flops_fwd, flops_bwd_w, flops_bwd_x;
};

/* Static description of one layer (what the cluster simulator and the
 * virtual clock need), as reported by model_layer_info. */
typedef struct layer_info {
	const char *name;
	int param_index;         /* -1 if no parameters, else 0-based index */
	size_t n_params, p_off;
	size_t n_weights;        /* the first of n_params: weights (the rest bias) */
	size_t act_floats;       /* output activation floats per sample */
	double flops_fwd, flops_bwd_w, flops_bwd_x; /* per sample */
} layer_info;

typedef struct model {
	char spec[128];
	int n_layers;
	layer layers[MODEL_MAX_LAYERS];
	int n_param_layers;
	shape input;
	int in_dim, classes;
	size_t n_params;
	size_t mem_bytes; /* backend memory its buffers hold */
	int batch_cap;
	backend *be;
	float *params;      /* own copy (backend memory); may be repointed */
	float *grads;       /* backend memory */
	float *act[MODEL_MAX_LAYERS + 1]; /* act[0] = input batch */
	float *dact[MODEL_MAX_LAYERS + 1];
	uint8_t *labels;    /* batch labels (host) */
	/* Optional per-layer timing (seconds, accumulated) for benchmarks:
	 * set profile = 1; forward/backward time of layer i lands in
	 * prof_fwd[i] / prof_bwd[i]; prof_loss gets the loss layer. */
	int profile;
	double prof_fwd[MODEL_MAX_LAYERS], prof_bwd[MODEL_MAX_LAYERS];
	double prof_loss;
} model;

/* Build a model for inputs of shape (c, h, w) and `classes` outputs, with
 * buffers for batches up to batch_cap. Parameters are initialised from
 * (seed, stream 0). On error *out is NULL and err names the problem. */
int model_new(const char *spec, int c, int h, int w, int classes,
	      int batch_cap, uint64_t seed, backend *be, model **out,
	      char *err);
/* Build from explicit layer descriptions (kind, units, k, stride, pad,
 * relu); used by tests. */
int model_new_layers(const layer *desc, int n, shape input, int classes,
		     int batch_cap, uint64_t seed, backend *be, model **out,
		     char *err);
void model_free(model *m);

/* Parameterised layers of a model spec without building it (the deepest
 * useful spb_depth), or -1 when the spec is not one model_new takes. */
int model_spec_param_layers(const char *spec);

/* (Re)initialise parameters from the seed (He/Xavier, zero biases). */
void model_init_params(model *m, uint64_t seed);

/* Copy a batch into the input buffer: x is sample-major host data (dim
 * floats each) gathered by idx; converted to the model's input layout. */
void model_load_batch(model *m, const float *x, const uint8_t *y,
		      const uint32_t *idx, int batch);

/* Forward on the loaded batch with parameters `params` (m->params if NULL).
 * Returns mean loss; *correct gets the hit count if non-NULL. */
double model_forward(model *m, const float *params, int batch, int *correct);

/* Forward + backward. Gradients (mean over the batch) of the top `depth`
 * parameterised layers are written to m->grads (depth <= 0 or >=
 * n_param_layers: all). Returns the mean loss. */
double model_step(model *m, const float *params, int batch, int depth);

/* Offset of the gradient tail covering the top `depth` parameterised
 * layers (0 for all). */
size_t model_tail_offset(const model *m, int depth);

/* FLOPs per sample of one step with backprop depth `depth` (all if <= 0). */
double model_step_flops(const model *m, int depth);

/* Fill info[0..n_layers) (n_layers returned). */
int model_layer_info(const model *m, layer_info *info, int max);

/* Evaluate on a whole set in batches of m->batch_cap: mean loss and
 * accuracy. */
struct dataset;
void model_evaluate(model *m, const float *params, const struct dataset *d,
		    double *loss, double *acc);
/* The same, calling between(ud) between two batches (a caller's chance
 * to do other work while a long evaluation goes on); between may be NULL. */
void model_evaluate_with(model *m, const float *params, const struct dataset *d,
			 double *loss, double *acc, void (*between)(void *), void *ud);

#endif
