/* op.h - a model's nodes and the ops they run: the op class (one const
 * struct per op, a file each in engine/nn/ops/ and a row in its table.c),
 * a node (one op applied to earlier nodes' outputs) and the description a
 * model is built from (model_new_nodes; later a run object's JSON).
 *
 * A model is a list of nodes in topological order: node i reads only the
 * model's input (index -1) or nodes before it. Its parameters are one flat
 * buffer, node by node (weights, then bias), so the parameterised nodes
 * above any one of them form a contiguous tail. */
#ifndef SL_OP_H
#define SL_OP_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "rng.h"

#define OP_MAX_IN 2 /* inputs a node reads (a residual add: 2) */

/* Per-sample shape; cb = 1 when the activation is a feature map stored
 * [C][H][W][B] (the batch innermost), 0 when it is [B][C*H*W]. */
typedef struct shape {
	int c, h, w;
	int cb;
} shape;

static inline size_t
shape_size(shape s)
{
	return (size_t)s.c * s.h * s.w;
}

/* One node as described (what a parser fills in): the op's name in the
 * table, its inputs by node index and integer attributes. n_in = 0 means
 * the node before (the model's input for the first); otherwise inputs[0..
 * n_in) name nodes before this one, or -1 for the model's input. */
typedef struct node_desc {
	const char *op;          /* "dense", "conv2d", "maxpool", "relu", ... */
	int n_in;
	int inputs[OP_MAX_IN];
	int units;               /* dense: outputs; conv: output channels */
	int k, stride, pad;      /* conv / pool */
	int relu;                /* fused relu on the output (dense, conv,
				  * batchnorm, shortcut) */
	int no_bias;             /* conv: no bias (one before a batch norm) */
	int he;                  /* He init though no relu follows (a conv
				  * before a batch norm) */
	int heads;               /* attention: heads (units / heads each) */
	int vocab;               /* embed: the token table's rows */
	int tie;                 /* lmhead: 1 + the index of the embed node
				  * whose token table it multiplies by (0:
				  * none) */
	float init_std;          /* linear: the weights' normal sd (0: 0.02) */
} node_desc;

typedef struct node node;

/* An op: what every node running it shares. */
typedef struct op_class {
	const char *name;
	int n_in; /* inputs it reads */
	/* Shape inference: n->out, parameter and state counts and per-sample
	 * FLOPs from n->in[] and the attributes; 0 or -SL_EINVAL. */
	int (*setup)(node *n, char *err);
	/* Initial parameters at params + n->p_off; NULL for an op without. */
	void (*init)(const node *n, float *params, rng *r);
	/* Bytes of per-sample scratch the forward keeps for the backward
	 * (n->scratch, batch_cap samples, zeroed backend memory); NULL for
	 * none. */
	size_t (*scratch_bytes)(const node *n);
	void (*forward)(node *n, backend *be, const float *params,
			const float *const *x, float *y, int batch);
	/* dy may be modified (relu mask). dx[i] is NULL when input i needs no
	 * gradient; else it is overwritten (the model sums a node's gradient
	 * over its consumers). Writes this node's slice of grads. */
	void (*backward)(node *n, backend *be, const float *params,
			 const float *const *x, const float *y, float *dy,
			 float *const *dx, float *grads, int batch);
	/* Can backend be run it: 0, or -SL_EUNSUP and err naming the op the
	 * backend lacks (the sequence ops are optional in backend.h). NULL:
	 * every backend can. */
	int (*check)(const node *n, const backend *be, char *err);
	/* 1: its weights are a norm's gains (1-D), which adamw's decoupled
	 * decay leaves alone, as nanoGPT decays only matrices and tables */
	int no_decay;
} op_class;

struct node {
	const op_class *op;
	int n_in;
	int inputs[OP_MAX_IN];   /* node indices; -1 the model's input */
	shape in[OP_MAX_IN], out;
	int units, k, stride, pad, relu, no_bias;
	int he_init;             /* He (a relu follows) or Xavier init */
	int heads, vocab;        /* attention, embed (node_desc) */
	float init_std;          /* linear (node_desc) */
	/* A tied token table is the head's parameter (at the top of the
	 * flat buffer, so every partial backward trains it through the
	 * head). lmhead: tie is the embed node that reads its table; embed:
	 * tied = 1 and tie the head whose table it reads (the head's backward
	 * writes the table's gradient first, this one adds its scatter) */
	const node *tie;
	int tied;
	conv_geom geom;
	size_t n_params, n_weights; /* weights then bias */
	size_t w_cols;           /* the weights as a row-major matrix of w_cols
				  * columns (dense, linear: in; conv: cin k k;
				  * embed, lmhead: E); 0: a vector (a norm's
				  * gains) */
	size_t p_off;            /* offset in the flat buffers */
	/* Floats of state that is not trained (batch norm's running
	 * statistics), set by setup: s_off in the model's state buffer, and
	 * state points there (NULL when n_state is 0). */
	size_t n_state, s_off;
	float *state;
	/* The mode of the forward in progress, set by the model before each
	 * node runs: training (batch statistics; the running statistics
	 * updated as run = (1 - momentum) run + momentum batch) or 0,
	 * evaluation (the running statistics, unchanged). */
	int training;
	float momentum;
	size_t act_floats;       /* output floats per sample */
	int n_out;               /* nodes reading this one's output */
	void *scratch;           /* scratch_bytes per sample (maxpool's argmax) */
	/* Cost per sample, for accounting and the virtual clock: the
	 * forward, the weight gradient, the input gradients (all inputs'),
	 * and of those input 1's (a two-input op; the rest is input 0's), so
	 * a backward that stops between a node's inputs counts only the
	 * gradient it computes. */
	double flops_fwd, flops_bwd_w, flops_bwd_x, flops_bwd_x1;
};

/* The ops (engine/nn/ops/table.c), NULL-terminated, and one by name (NULL
 * when unknown). */
extern const op_class *const op_table[];
const op_class *op_find(const char *name);

#endif
